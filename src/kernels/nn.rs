//! Neural-network kernels: softmax/log_softmax, losses, layer/batch norm, embedding backward, optimizer foreach ops.
