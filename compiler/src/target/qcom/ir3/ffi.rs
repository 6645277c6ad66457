//! Mesa's ir3 compiler, reached through `libpilot_ir3.so` (built from `mesa-ir3/pilot_ir3.c` by
//! `scripts/build_mesa.sh`) opened at run time: `cargo build` never needs Mesa and nothing pilot ships
//! links it. The library is `$PILOT_IR3_LIB`, else the repository's `target/mesa/libpilot_ir3.so`.

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use crate::error::{CompileError, Result};

/// An SSA value of the shader being built (`nir_def *`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Def(*mut c_void);

/// An open loop (`nir_loop *`).
#[derive(Clone, Copy, Debug)]
pub struct Loop(*mut c_void);

/// A function-local variable (`nir_variable *`).
#[derive(Clone, Copy, Debug)]
pub struct Var(*mut c_void);

/// `struct pilot_ir3_facts` of mesa-ir3/pilot_ir3.c, field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Facts {
    pub instr_dwords: u32,
    pub instrlen: u32,
    pub max_reg: i32,
    pub max_half_reg: i32,
    pub constlen: u32,
    pub params_offset_vec4: u32,
    pub params_size_vec4: u32,
    pub driver_params_offset_vec4: u32,
    pub driver_params_size_vec4: u32,
    pub immediates_offset_vec4: u32,
    pub immediates_count: u32,
    pub branchstack: u32,
    pub pvtmem_size: u32,
    pub shared_size: u32,
    pub num_tex: u32,
    pub num_ibo: u32,
    pub tex_to_image: [u8; 32],
    pub work_group_id_regid: u32,
    pub local_invocation_id_regid: u32,
    pub threadsize_double: u32,
}

type Raw = *mut c_void;

/// The library's entry points (mesa-ir3/pilot_ir3.c).
struct Api {
    version: unsafe extern "C" fn() -> *const c_char,
    begin: unsafe extern "C" fn(*const c_char, u32, u32, u32) -> Raw,
    free: unsafe extern "C" fn(Raw),
    imm: unsafe extern "C" fn(Raw, u32, u64) -> Raw,
    alu: unsafe extern "C" fn(Raw, *const c_char, Raw, Raw, Raw) -> Raw,
    builtin: unsafe extern "C" fn(Raw, *const c_char, Raw, Raw) -> Raw,
    param: unsafe extern "C" fn(Raw, u32, u32) -> Raw,
    global_id: unsafe extern "C" fn(Raw, u32) -> Raw,
    load_global: unsafe extern "C" fn(Raw, Raw, u32) -> Raw,
    store_global: unsafe extern "C" fn(Raw, Raw, Raw),
    load_global_at: unsafe extern "C" fn(Raw, Raw, Raw, u32) -> Raw,
    store_global_at: unsafe extern "C" fn(Raw, Raw, Raw, Raw),
    image_load: unsafe extern "C" fn(Raw, u32, Raw, Raw) -> Raw,
    image_store: unsafe extern "C" fn(Raw, u32, Raw, Raw, Raw),
    channel: unsafe extern "C" fn(Raw, Raw, u32) -> Raw,
    vec4: unsafe extern "C" fn(Raw, Raw, Raw, Raw, Raw) -> Raw,
    var: unsafe extern "C" fn(Raw, u32) -> Raw,
    var_load: unsafe extern "C" fn(Raw, Raw) -> Raw,
    var_store: unsafe extern "C" fn(Raw, Raw, Raw),
    loop_begin: unsafe extern "C" fn(Raw) -> Raw,
    break_if: unsafe extern "C" fn(Raw, Raw),
    loop_end: unsafe extern "C" fn(Raw, Raw),
    error: unsafe extern "C" fn(Raw) -> *const c_char,
    compile: unsafe extern "C" fn(Raw, *mut Facts, *mut *mut u32, *mut *mut u32) -> bool,
    free_buffer: unsafe extern "C" fn(*mut c_void),
}

// SAFETY: the function pointers are plain code addresses of a library that is never closed.
unsafe impl Send for Api {}
// SAFETY: as for Send; calls are serialized by `LOCK`.
unsafe impl Sync for Api {}

/// Where the library is looked for.
pub fn library_path() -> PathBuf {
    match std::env::var_os("PILOT_IR3_LIB") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/mesa/libpilot_ir3.so"),
    }
}

fn api() -> Result<&'static Api> {
    static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();
    API.get_or_init(open).as_ref().map_err(|e| CompileError::Tool(e.clone()))
}

// Each symbol's target type is the `Api` field it initializes.
#[allow(clippy::missing_transmute_annotations)]
fn open() -> std::result::Result<Api, String> {
    let path = library_path();
    let missing = |why: String| {
        format!(
            "--qcom-compiler ir3 needs Mesa's ir3 compiler: {} {why}; run scripts/setup.sh (or set PILOT_IR3_LIB)",
            path.display()
        )
    };
    let cpath = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| missing("is not a C path".into()))?;
    // SAFETY: dlopen of a path; the handle is kept for the life of the process (never dlclose'd).
    let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns a static, NUL-terminated message after a failed dlopen.
        let why = unsafe { CStr::from_ptr(libc::dlerror()) }.to_string_lossy().into_owned();
        return Err(missing(format!("cannot be opened ({why})")));
    }
    macro_rules! sym {
        ($name:literal) => {{
            let name = concat!($name, "\0");
            // SAFETY: `name` is NUL-terminated; the symbol's type is the one pilot_ir3.c declares.
            let p = unsafe { libc::dlsym(handle, name.as_ptr().cast()) };
            if p.is_null() {
                return Err(missing(format!("lacks `{}` (rebuild it: scripts/setup.sh)", $name)));
            }
            // SAFETY: as above.
            unsafe { std::mem::transmute::<*mut c_void, _>(p) }
        }};
    }
    Ok(Api {
        version: sym!("pilot_ir3_version"),
        begin: sym!("pilot_ir3_begin"),
        free: sym!("pilot_ir3_free"),
        imm: sym!("pilot_ir3_imm"),
        alu: sym!("pilot_ir3_alu"),
        builtin: sym!("pilot_ir3_builtin"),
        param: sym!("pilot_ir3_param"),
        global_id: sym!("pilot_ir3_global_id"),
        load_global: sym!("pilot_ir3_load_global"),
        store_global: sym!("pilot_ir3_store_global"),
        load_global_at: sym!("pilot_ir3_load_global_at"),
        store_global_at: sym!("pilot_ir3_store_global_at"),
        image_load: sym!("pilot_ir3_image_load"),
        image_store: sym!("pilot_ir3_image_store"),
        channel: sym!("pilot_ir3_channel"),
        vec4: sym!("pilot_ir3_vec4"),
        var: sym!("pilot_ir3_var"),
        var_load: sym!("pilot_ir3_var_load"),
        var_store: sym!("pilot_ir3_var_store"),
        loop_begin: sym!("pilot_ir3_loop_begin"),
        break_if: sym!("pilot_ir3_break_if"),
        loop_end: sym!("pilot_ir3_loop_end"),
        error: sym!("pilot_ir3_error"),
        compile: sym!("pilot_ir3_compile"),
        free_buffer: sym!("pilot_ir3_free_buffer"),
    })
}

/// The compiler and its version, as recorded in artifacts (`Mesa 25.0.7`).
pub fn version() -> Result<String> {
    let api = api()?;
    // SAFETY: returns a static string.
    Ok(unsafe { CStr::from_ptr((api.version)()) }.to_string_lossy().into_owned())
}

/// One compiled program.
pub struct Compiled {
    pub code: Vec<u32>,
    pub immediates: Vec<u32>,
    pub facts: Facts,
}

/// Mesa's state is process-global and not thread-safe: one shader is built at a time.
static LOCK: Mutex<()> = Mutex::new(());

/// A compute shader under construction. Every [`Def`] belongs to the shader that made it.
pub struct Shader {
    api: &'static Api,
    raw: Raw,
    _guard: std::sync::MutexGuard<'static, ()>,
}

impl Shader {
    /// A new compute shader named `name` for work-groups of `local` work-items.
    pub fn new(name: &str, local: [u32; 3]) -> Result<Shader> {
        let api = api()?;
        let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let cname = CString::new(name).map_err(|_| CompileError::Graph(format!("kernel name `{name}` has a NUL")))?;
        // SAFETY: plain arguments; the result is owned by this Shader.
        let raw = unsafe { (api.begin)(cname.as_ptr(), local[0], local[1], local[2]) };
        if raw.is_null() {
            return Err(CompileError::Tool("Mesa's ir3 compiler could not be created for the Adreno 630".into()));
        }
        Ok(Shader { api, raw, _guard: guard })
    }

    fn def(p: Raw, what: &str) -> Def {
        assert!(!p.is_null(), "pilot_ir3 refused {what} (a renderer bug)");
        Def(p)
    }

    /// A `bits`-bit constant (1 bit: a boolean).
    pub fn imm(&mut self, bits: u32, value: u64) -> Def {
        // SAFETY: valid builder.
        Self::def(unsafe { (self.api.imm)(self.raw, bits, value) }, "an immediate")
    }

    /// The NIR ALU opcode `op` on 1 to 3 sources.
    pub fn alu(&mut self, op: &str, srcs: &[Def]) -> Def {
        let c = CString::new(op).expect("opcode names have no NUL");
        let s = |i: usize| srcs.get(i).map_or(std::ptr::null_mut(), |d| d.0);
        // SAFETY: the sources are defs of this shader; null marks absent ones.
        let p = unsafe { (self.api.alu)(self.raw, c.as_ptr(), s(0), s(1), s(2)) };
        Self::def(p, op)
    }

    /// A function Mesa builds from several instructions (`atan`, `atan2`).
    pub fn builtin(&mut self, name: &str, a: Def, b: Option<Def>) -> Def {
        let c = CString::new(name).expect("no NUL");
        // SAFETY: as for `alu`.
        let p = unsafe { (self.api.builtin)(self.raw, c.as_ptr(), a.0, b.map_or(std::ptr::null_mut(), |d| d.0)) };
        Self::def(p, name)
    }

    /// `bits` bits of the kernel parameters at byte `offset`.
    pub fn param(&mut self, offset: u32, bits: u32) -> Def {
        // SAFETY: valid builder.
        Self::def(unsafe { (self.api.param)(self.raw, offset, bits) }, "a parameter")
    }

    /// The 32-bit global invocation id along `dim`.
    pub fn global_id(&mut self, dim: u32) -> Def {
        // SAFETY: valid builder.
        Self::def(unsafe { (self.api.global_id)(self.raw, dim) }, "the global id")
    }

    pub fn load_global(&mut self, addr: Def, bits: u32) -> Def {
        // SAFETY: `addr` is a 64-bit def of this shader.
        Self::def(unsafe { (self.api.load_global)(self.raw, addr.0, bits) }, "a global load")
    }

    pub fn store_global(&mut self, addr: Def, val: Def) {
        // SAFETY: defs of this shader.
        unsafe { (self.api.store_global)(self.raw, addr.0, val.0) }
    }

    /// `components` (1..=4) consecutive 32-bit words from word `words` (a 32-bit def) past the
    /// 64-bit address `base`.
    pub fn load_global_at(&mut self, base: Def, words: Def, components: u32) -> Def {
        debug_assert!((1..=4).contains(&components));
        // SAFETY: defs of this shader.
        Self::def(unsafe { (self.api.load_global_at)(self.raw, base.0, words.0, components) }, "a global load")
    }

    /// Stores the 32-bit `val` at word `words` (a 32-bit def) past the 64-bit address `base`.
    pub fn store_global_at(&mut self, base: Def, words: Def, val: Def) {
        // SAFETY: defs of this shader.
        unsafe { (self.api.store_global_at)(self.raw, base.0, words.0, val.0) }
    }

    /// Pixel (x, y) of read image `index` as four floats.
    pub fn image_load(&mut self, index: u32, x: Def, y: Def) -> Def {
        // SAFETY: 32-bit defs of this shader.
        Self::def(unsafe { (self.api.image_load)(self.raw, index, x.0, y.0) }, "an image load")
    }

    pub fn image_store(&mut self, index: u32, x: Def, y: Def, rgba: Def) {
        // SAFETY: defs of this shader.
        unsafe { (self.api.image_store)(self.raw, index, x.0, y.0, rgba.0) }
    }

    pub fn channel(&mut self, v: Def, c: u32) -> Def {
        // SAFETY: a vector def of this shader.
        Self::def(unsafe { (self.api.channel)(self.raw, v.0, c) }, "a channel")
    }

    pub fn vec4(&mut self, v: [Def; 4]) -> Def {
        // SAFETY: defs of this shader.
        Self::def(unsafe { (self.api.vec4)(self.raw, v[0].0, v[1].0, v[2].0, v[3].0) }, "a vec4")
    }

    pub fn var(&mut self, bits: u32) -> Var {
        // SAFETY: valid builder.
        Var(unsafe { (self.api.var)(self.raw, bits) })
    }

    pub fn load(&mut self, v: Var) -> Def {
        // SAFETY: a variable of this shader.
        Self::def(unsafe { (self.api.var_load)(self.raw, v.0) }, "a variable load")
    }

    pub fn store(&mut self, v: Var, x: Def) {
        // SAFETY: a variable and def of this shader, of the same bit size.
        unsafe { (self.api.var_store)(self.raw, v.0, x.0) }
    }

    /// Opens a loop; returns the handle [`Shader::end_loop`] closes.
    pub fn begin_loop(&mut self) -> Loop {
        // SAFETY: valid builder.
        Loop(unsafe { (self.api.loop_begin)(self.raw) })
    }

    pub fn break_if(&mut self, cond: Def) {
        // SAFETY: a boolean def of this shader.
        unsafe { (self.api.break_if)(self.raw, cond.0) }
    }

    pub fn end_loop(&mut self, l: Loop) {
        // SAFETY: a loop of this shader (loops close innermost first, as the renderer nests them).
        unsafe { (self.api.loop_end)(self.raw, l.0) }
    }

    /// Finalizes, compiles for the Adreno 630 and assembles.
    pub fn compile(self) -> Result<Compiled> {
        let mut facts = Facts::default();
        let (mut code, mut imms) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: out-pointers to locals; on success both buffers are malloc'd with the counts in `facts`.
        let ok = unsafe { (self.api.compile)(self.raw, &mut facts, &mut code, &mut imms) };
        if !ok {
            // SAFETY: the shim's message buffer, NUL-terminated.
            let why = unsafe { CStr::from_ptr((self.api.error)(self.raw)) }.to_string_lossy().into_owned();
            return Err(CompileError::Tool(why));
        }
        // SAFETY: the buffers hold the counts the facts report; they are copied, then freed once.
        let (code_v, imm_v) = unsafe {
            let c = std::slice::from_raw_parts(code, facts.instr_dwords as usize).to_vec();
            let i = std::slice::from_raw_parts(imms, facts.immediates_count as usize).to_vec();
            (self.api.free_buffer)(code.cast());
            (self.api.free_buffer)(imms.cast());
            (c, i)
        };
        Ok(Compiled { code: code_v, immediates: imm_v, facts })
    }
}

impl Drop for Shader {
    fn drop(&mut self) {
        // SAFETY: frees what `begin` made (the shader itself is freed by compile when it got that far).
        unsafe { (self.api.free)(self.raw) }
    }
}
