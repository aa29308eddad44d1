#pragma once

#include <cstdint>

#include "actorflow/graph/graph_def.hpp"

namespace actorflow {

struct matmul_pipelining_options {
  /// The most row blocks a tensor is cut into (fewer when its rows do not
  /// divide evenly; not cut when only 1 would).
  int pieces = 4;
  /// The smallest tensor, in bytes, worth cutting: below it the transfer
  /// costs less than the extra messages and the copy that joins the blocks.
  int64_t min_bytes = int64_t{256} << 10;
};

/// Rewrites a placed graph (every node has a full device; run before
/// `partition`) so that a large MatMul operand or result that crosses
/// between tasks travels in row blocks, each block's GEMM overlapping the
/// transfer of the next. actorflow's own rewrite: TensorFlow's gRPC runtime
/// sends such a tensor whole, and nothing can start before all of it is
/// there. Two shapes qualify; both need static shapes (from `shape`
/// attributes of placeholders and variables, propagated through Identity,
/// element-wise ops, BiasAdd and MatMul) and rows divisible by the count:
///
/// - an operand: `m = MatMul(a, b)` where `b` [K, N] comes from another
///   task and transpose_b is false. `b` is split into row blocks on its
///   producer's device (views, no copy), `a` into the matching column
///   blocks (rows when transpose_a) on m's, and m becomes
///   `AddN(MatMul(a_j, b_j)...)`: each block's product starts when its
///   block arrives. A ps's weights feeding a worker's first layer. Row
///   blocks of `a` come from a Split (views); a column block is not cut
///   out at all: its MatMul reads those columns of `a` in place
///   (attributes `_a_col_begin`, `_a_col_count`, which the MatMul kernel
///   honours), where a Split would copy them.
/// - a result: `m = MatMul(a, b)` [R, N] consumed on another task. `a` is
///   split so that `MatMul(a_j, b)` are m's row blocks, each sent as soon
///   as it is computed, and a ConcatV2 on each consuming device joins
///   them. A worker's gradient going to its ps. A training op (ApplyAdam,
///   ApplyGradientDescent, ApplyMomentum, ApplyAdagrad) that takes m as its
///   gradient, and whose own output only control edges use, needs no join:
///   it becomes one update per row block (attribute `_row_begin`, which
///   the variable actor honours), each run when its block arrives, under a
///   NoOp of the op's name. m itself stays (as a ConcatV2) only where its
///   own task consumes it.
///
/// The blocks' sum may round differently from one product in the last
/// bits. Splits of one tensor into rows are shared. Returns the
/// number of MatMuls rewritten; never fails (a node that does not qualify
/// is left as it is).
int pipeline_cut_matmuls(graph_def& placed,
                         const matmul_pipelining_options& opts = {});

} // namespace actorflow
