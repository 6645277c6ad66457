//! Generates the register modules from `regs/*.regs` into `OUT_DIR` (pilot-regs-gen).

fn main() {
    pilot_regs_gen::build();
}
