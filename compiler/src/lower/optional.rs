//! Optional values where the compiler knows them: an optional is present when its producer gave a
//! tensor and absent when the input name is empty. OptionalHasElement folds to that; Optional and
//! OptionalGetElement pass a present tensor through. Optional-typed graph inputs (whose presence is
//! only known at run time) are refused at import.

use pilot_core::DType;

use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::lazy::Lazy;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "OptionalHasElement" => has_element,
        "OptionalGetElement" | "Optional" => get_element,
        _ => return None,
    })
}

fn has_element(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let present = c.has_input(0);
    Ok(vec![c.p().full(DType::Bool, &[], if present { 1.0 } else { 0.0 })])
}

fn get_element(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    if !c.has_input(0) {
        return Err(c.err("an empty optional has no element (pilot represents only present optionals)"));
    }
    Ok(vec![c.input(0)?])
}
