//! Data movement and indexing: cat, index/index_put, gather/scatter, masked_select, nonzero, sort/topk, factories.
