//! Reductions (sum, mean, prod, max/min, arg*, var/std, norm, all/any, logsumexp) and scans (cumsum, cumprod).
