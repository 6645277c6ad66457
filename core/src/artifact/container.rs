//! The out-of-band container (being written).
