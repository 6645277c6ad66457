//! Pickle opcode bytes (protocols 0 to 5) and their names, for the reader and writer.

pub const MARK: u8 = 0x28;
pub const EMPTY_TUPLE: u8 = 0x29;
pub const STOP: u8 = 0x2e;
pub const POP: u8 = 0x30;
pub const POP_MARK: u8 = 0x31;
pub const BINBYTES: u8 = 0x42;
pub const SHORT_BINBYTES: u8 = 0x43;
pub const BINFLOAT: u8 = 0x47;
pub const BININT: u8 = 0x4a;
pub const BININT1: u8 = 0x4b;
pub const BININT2: u8 = 0x4d;
pub const NONE: u8 = 0x4e;
pub const BINUNICODE: u8 = 0x58;
pub const EMPTY_LIST: u8 = 0x5d;
pub const APPEND: u8 = 0x61;
pub const APPENDS: u8 = 0x65;
pub const BINGET: u8 = 0x68;
pub const LONG_BINGET: u8 = 0x6a;
pub const BINPUT: u8 = 0x71;
pub const LONG_BINPUT: u8 = 0x72;
pub const SETITEM: u8 = 0x73;
pub const TUPLE: u8 = 0x74;
pub const SETITEMS: u8 = 0x75;
pub const EMPTY_DICT: u8 = 0x7d;
pub const PROTO: u8 = 0x80;
pub const TUPLE1: u8 = 0x85;
pub const TUPLE2: u8 = 0x86;
pub const TUPLE3: u8 = 0x87;
pub const NEWTRUE: u8 = 0x88;
pub const NEWFALSE: u8 = 0x89;
pub const LONG1: u8 = 0x8a;
pub const SHORT_BINUNICODE: u8 = 0x8c;
pub const BINUNICODE8: u8 = 0x8d;
pub const BINBYTES8: u8 = 0x8e;
pub const MEMOIZE: u8 = 0x94;
pub const FRAME: u8 = 0x95;
pub const NEXT_BUFFER: u8 = 0x97;
pub const READONLY_BUFFER: u8 = 0x98;

/// The pickletools name of opcode byte `op` (any protocol), or `None` for a byte that is no opcode.
pub fn name(op: u8) -> Option<&'static str> {
    Some(match op {
        0x28 => "MARK",
        0x29 => "EMPTY_TUPLE",
        0x2e => "STOP",
        0x30 => "POP",
        0x31 => "POP_MARK",
        0x32 => "DUP",
        0x42 => "BINBYTES",
        0x43 => "SHORT_BINBYTES",
        0x46 => "FLOAT",
        0x47 => "BINFLOAT",
        0x49 => "INT",
        0x4a => "BININT",
        0x4b => "BININT1",
        0x4c => "LONG",
        0x4d => "BININT2",
        0x4e => "NONE",
        0x50 => "PERSID",
        0x51 => "BINPERSID",
        0x52 => "REDUCE",
        0x53 => "STRING",
        0x54 => "BINSTRING",
        0x55 => "SHORT_BINSTRING",
        0x56 => "UNICODE",
        0x58 => "BINUNICODE",
        0x5d => "EMPTY_LIST",
        0x61 => "APPEND",
        0x62 => "BUILD",
        0x63 => "GLOBAL",
        0x64 => "DICT",
        0x65 => "APPENDS",
        0x67 => "GET",
        0x68 => "BINGET",
        0x69 => "INST",
        0x6a => "LONG_BINGET",
        0x6c => "LIST",
        0x6f => "OBJ",
        0x70 => "PUT",
        0x71 => "BINPUT",
        0x72 => "LONG_BINPUT",
        0x73 => "SETITEM",
        0x74 => "TUPLE",
        0x75 => "SETITEMS",
        0x7d => "EMPTY_DICT",
        0x80 => "PROTO",
        0x81 => "NEWOBJ",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        0x85 => "TUPLE1",
        0x86 => "TUPLE2",
        0x87 => "TUPLE3",
        0x88 => "NEWTRUE",
        0x89 => "NEWFALSE",
        0x8a => "LONG1",
        0x8b => "LONG4",
        0x8c => "SHORT_BINUNICODE",
        0x8d => "BINUNICODE8",
        0x8e => "BINBYTES8",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x92 => "NEWOBJ_EX",
        0x93 => "STACK_GLOBAL",
        0x94 => "MEMOIZE",
        0x95 => "FRAME",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => return None,
    })
}

/// `0x63 'c' (GLOBAL)`: the byte, its ASCII form when printable, and its name.
pub fn describe(op: u8) -> String {
    let name = name(op).unwrap_or("not an opcode");
    if op.is_ascii_graphic() {
        format!("0x{op:02x} '{}' ({name})", op as char)
    } else {
        format!("0x{op:02x} ({name})")
    }
}
