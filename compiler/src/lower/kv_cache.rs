//! TensorScatter (opset 24): writes `update` into a key/value cache along `axis`, each batch row at
//! its own run-time position `write_indices[b]` (`linear`), or wrapping around the cache
//! (`circular`). Every output element reads either the update or the old cache.

use std::collections::HashMap;

use super::{NodeCtx, OpFn};
use crate::error::Result;
use crate::ir::subst::substitute;
use crate::ir::{BinOp, INDEX, N};
use crate::lazy::Lazy;

pub(super) fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "TensorScatter" => tensor_scatter,
        _ => return None,
    })
}

fn tensor_scatter(c: &mut NodeCtx<'_>) -> Result<Vec<Lazy>> {
    let (past, update) = (c.input(0)?, c.input(1)?);
    let writes = c.opt_input(2)?;
    let rank = past.rank();
    let axis = c.axis(c.attr_int("axis", -2), rank)?;
    let circular = match c.attr_str("mode", "linear").as_str() {
        "linear" => false,
        "circular" => true,
        m => return Err(c.err(format!("unknown mode `{m}`"))),
    };
    let fits = update.rank() == rank
        && update.dtype == past.dtype
        && (0..rank)
            .all(|i| if i == axis { update.shape[i] <= past.shape[i] } else { update.shape[i] == past.shape[i] });
    if axis == 0 || !fits {
        return Err(c.err(format!(
            "update {} {:?} does not fit cache {} {:?} along axis {axis} (after the batch axis)",
            update.dtype, update.shape, past.dtype, past.shape
        )));
    }
    if let Some(w) = &writes {
        if w.shape != [past.shape[0]] || w.dtype.is_float() {
            return Err(c.err(format!("write_indices {} {:?}: integers [{}]", w.dtype, w.shape, past.shape[0])));
        }
    }
    let (cache_len, len) = (past.shape[axis] as i64, update.shape[axis] as i64);
    let p = c.p();
    let vars = past.vars.clone();
    let (b, j) = (p.ctx.var(vars[0]), p.ctx.var(vars[axis]));
    let start = match &writes {
        Some(w) => {
            let at = substitute(&mut p.ctx, w.expr, &HashMap::from([(w.vars[0], b)]), None);
            p.ctx.cast(at, INDEX)
        }
        None => p.ctx.int(0),
    };
    // The update row landing at cache position j, and whether one does.
    let mut k = p.ctx.sub(j, start);
    if circular {
        let r = p.ctx.rem_i(k, cache_len);
        let r = p.ctx.add_i(r, cache_len);
        k = p.ctx.rem_i(r, cache_len);
    }
    let zero = p.ctx.int(0);
    let ge = p.ctx.binary(BinOp::Le, zero, k);
    let lt = p.ctx.lt_i(k, len);
    let lands = p.ctx.and(ge, lt);
    let lo = p.ctx.int(0);
    let hi = p.ctx.int(len - 1);
    let k = p.ctx.binary(BinOp::Max, k, lo);
    let k = p.ctx.binary(BinOp::Min, k, hi);
    let map: HashMap<u32, N> =
        (0..rank).map(|i| (update.vars[i], if i == axis { k } else { p.ctx.var(vars[i]) })).collect();
    let new = substitute(&mut p.ctx, update.expr, &map, None);
    let expr = p.ctx.where_(lands, new, past.expr);
    Ok(vec![Lazy { expr, ..past }])
}
