#include "actorflow/graph/matmul_pipelining.hpp"

#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "actorflow/graph/device_name.hpp"

namespace actorflow {

namespace {

// Ops whose output has the shape of their first input, and ops whose
// inputs all share their output's shape (the gradients of activations).
const std::set<std::string_view> shape_of_first{
  "Identity", "Snapshot",  "StopGradient", "Relu",      "Relu6",
  "Elu",      "Selu",      "Tanh",         "Sigmoid",   "Softplus",
  "Neg",      "Abs",       "Square",       "Sqrt",      "Rsqrt",
  "Exp",      "Log",       "Cast",         "BiasAdd",   "ZerosLike",
  "OnesLike", "Softmax",   "LogSoftmax",   "ReadVariableOp"};
const std::set<std::string_view> shape_of_any{
  "ReluGrad", "Relu6Grad", "EluGrad", "TanhGrad", "SigmoidGrad"};
// Element-wise binary ops, whose output is the one operand's shape when
// the other is a scalar or both agree (the only broadcasts handled here).
const std::set<std::string_view> binary{"Add",     "AddV2",   "Sub",
                                        "Mul",     "RealDiv", "Maximum",
                                        "Minimum", "SquaredDifference"};
// Ops that make a tensor of the shape their first input (a Const) holds.
const std::set<std::string_view> shaped_by_input{
  "RandomUniform", "RandomStandardNormal", "TruncatedNormal", "Fill"};

class pipeliner {
public:
  pipeliner(graph_def& g, const matmul_pipelining_options& opts)
    : g_(g), opts_(opts) {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      index_.emplace(g_.nodes[i].name, i);
      for (auto& in : g_.nodes[i].inputs)
        consumers_[parse_input(in).node].push_back(i);
    }
    infer_shapes();
  }

  int run() {
    int rewritten = 0;
    // Only the nodes there before the rewrite: the pieces never qualify.
    auto count = g_.nodes.size();
    for (size_t i = 0; i < count; ++i) {
      if (g_.nodes[i].op != "MatMul")
        continue;
      if (cut_operand(i) || cut_result(i))
        ++rewritten;
    }
    if (rewritten > 0)
      finish();
    return rewritten;
  }

private:
  // -- static shapes ----------------------------------------------------------

  tensor_shape shape_of(const std::string& input) const {
    auto ref = parse_input(input);
    if (ref.control || ref.index != 0)
      return tensor_shape::unknown();
    auto i = shapes_.find(ref.node);
    return i == shapes_.end() ? tensor_shape::unknown() : i->second;
  }

  // The shape an int32 or int64 vector Const holds, e.g. RandomUniform's
  // `shape` input; unknown for anything else.
  tensor_shape shape_held_by(const std::string& input) const {
    auto ref = parse_input(input);
    auto i = index_.find(ref.node);
    if (i == index_.end() || ref.index != 0)
      return tensor_shape::unknown();
    auto& n = g_.nodes[i->second];
    auto v = n.attrs.find("value");
    if (n.op != "Const" || v == n.attrs.end())
      return tensor_shape::unknown();
    auto* t = std::get_if<tensor>(&v->second);
    if (!t || t->shape().rank() != 1)
      return tensor_shape::unknown();
    std::vector<int64_t> dims;
    if (t->type() == dtype::int32)
      for (auto d : t->flat<int32_t>())
        dims.push_back(d);
    else if (t->type() == dtype::int64)
      for (auto d : t->flat<int64_t>())
        dims.push_back(d);
    else
      return tensor_shape::unknown();
    return tensor_shape{dims};
  }

  // Output 0's static shape of every node, inputs first (a placed graph
  // lists a node's inputs before it; one that does not stays unknown).
  void infer_shapes() {
    for (auto& n : g_.nodes) {
      auto s = tensor_shape::unknown();
      if (n.op == "Const") {
        if (auto v = n.attrs.find("value"); v != n.attrs.end())
          if (auto t = std::get_if<tensor>(&v->second))
            s = t->shape();
      } else if (n.op == "Placeholder" || n.op == "PlaceholderWithDefault"
                 || n.op == "VariableV2" || n.op == "Variable"
                 || n.op == "VarHandleOp" || n.op == "_Arg") {
        s = n.attr_or<tensor_shape>("shape", tensor_shape::unknown());
      } else if (shape_of_first.count(n.op) > 0 && !n.inputs.empty()) {
        s = shape_of(n.inputs[0]);
      } else if (shape_of_any.count(n.op) > 0) {
        for (auto& in : n.inputs)
          if (auto t = shape_of(in); t.rank() >= 0) {
            s = t;
            break;
          }
      } else if (binary.count(n.op) > 0 && n.inputs.size() == 2) {
        auto x = shape_of(n.inputs[0]);
        auto y = shape_of(n.inputs[1]);
        if (y.rank() == 0 || (x == y && x.rank() > 0))
          s = x;
        else if (x.rank() == 0)
          s = y;
      } else if (shaped_by_input.count(n.op) > 0 && !n.inputs.empty()) {
        s = shape_held_by(n.inputs[0]);
      } else if (n.op == "MatMul" && n.inputs.size() >= 2) {
        auto a = shape_of(n.inputs[0]);
        auto b = shape_of(n.inputs[1]);
        auto ta = n.attr_or<bool>("transpose_a", false);
        auto tb = n.attr_or<bool>("transpose_b", false);
        int64_t rows = a.rank() == 2 ? a.dim(ta ? 1 : 0) : -1;
        int64_t cols = b.rank() == 2 ? b.dim(tb ? 0 : 1) : -1;
        s = tensor_shape{rows, cols};
      }
      shapes_[n.name] = s;
    }
  }

  // -- qualifying -------------------------------------------------------------

  static std::string task_of(const std::string& device) {
    device_name d;
    if (!device_name::parse(device, d).ok() || !d.job || !d.task)
      return device;
    return *d.job + "/" + std::to_string(d.replica.value_or(0)) + "/"
           + std::to_string(*d.task);
  }

  // The number of row blocks for `rows` rows of `bytes` bytes in all (0:
  // not worth cutting).
  int pieces_for(int64_t rows, int64_t bytes) const {
    if (rows <= 0 || bytes < opts_.min_bytes)
      return 0;
    for (int k = opts_.pieces; k >= 2; --k)
      if (rows % k == 0)
        return k;
    return 0;
  }

  int64_t bytes_of(const tensor_shape& s, const node_def& m) const {
    auto n = s.num_elements();
    auto type = m.attr_or<dtype>("T", dtype::invalid);
    if (n < 0 || type == dtype::invalid || type == dtype::string)
      return -1;
    // -1 (unknown) when the bytes overflow: the shape is a client's.
    return multiply_without_overflow(n,
                                     static_cast<int64_t>(dtype_size(type)));
  }

  const node_def* producer(const std::string& input) const {
    auto i = index_.find(parse_input(input).node);
    return i == index_.end() ? nullptr : &g_.nodes[i->second];
  }

  // -- rewriting --------------------------------------------------------------

  std::string fresh(const std::string& base) {
    auto name = base;
    for (int k = 1; index_.count(name) > 0 || taken_.count(name) > 0; ++k)
      name = base + "_" + std::to_string(k);
    taken_.insert(name);
    return name;
  }

  std::string add_const(const std::string& name, int32_t value,
                        const std::string& device) {
    node_def c;
    c.name = fresh(name);
    c.op = "Const";
    c.device = device;
    c.attrs["value"] = tensor::scalar(value);
    c.attrs["dtype"] = dtype::int32;
    added_.push_back(c);
    return c.name;
  }

  // The Split of `input` into `k` blocks along `axis` on `device`, shared
  // by every rewrite that asks for the same one.
  std::string split(const std::string& input, int axis, int k,
                    const std::string& device, dtype type,
                    const std::string& base) {
    auto ref = parse_input(input);
    auto key = std::make_tuple(tensor_name(ref.node, ref.index), axis, k,
                               device);
    if (auto i = splits_.find(key); i != splits_.end())
      return i->second;
    node_def s;
    s.name = fresh(base);
    s.op = "Split";
    s.device = device;
    s.inputs = {add_const(s.name + "/split_dim", axis, device),
                input_name(ref.node, ref.index)};
    s.attrs["T"] = type;
    s.attrs["num_split"] = static_cast<int64_t>(k);
    splits_[key] = s.name;
    added_.push_back(s);
    return s.name;
  }

  // m's `k` block products on m's device: block j of a (split along
  // `axis`) times b_of(j), each a MatMul with m's attributes and control
  // inputs. Returns their names. Row blocks of a are a Split's views; a
  // column block, which a Split would copy, is read in place by its
  // MatMul (attributes `_a_col_begin`, `_a_col_count`).
  template <class F>
  std::vector<std::string> block_products(const node_def& m, int k, int axis,
                                          F b_of) {
    auto base = m.name + "/_pipelined/";
    std::string as;
    if (axis == 0)
      as = split(m.inputs[0], axis, k, m.device, m.attr<dtype>("T"),
                 base + "split_a");
    auto width = shape_of(m.inputs[0]).dim(1) / k;
    std::vector<std::string> names;
    for (int j = 0; j < k; ++j) {
      node_def piece = m;
      piece.name = fresh(base + "matmul_" + std::to_string(j));
      if (axis == 0) {
        piece.inputs = {input_name(as, j), b_of(j)};
      } else {
        piece.inputs = {m.inputs[0], b_of(j)};
        piece.attrs["_a_col_begin"] = width * j;
        piece.attrs["_a_col_count"] = width;
      }
      for (auto& in : m.inputs)
        if (!in.empty() && in[0] == '^')
          piece.inputs.push_back(in);
      names.push_back(piece.name);
      added_.push_back(std::move(piece));
    }
    return names;
  }

  // m = MatMul(a, b), b [K, N] from another task: m = AddN(a_j b_j).
  bool cut_operand(size_t i) {
    auto m = g_.nodes[i];
    if (m.inputs.size() < 2 || m.attr_or<bool>("transpose_b", false))
      return false;
    auto* b_node = producer(m.inputs[1]);
    if (!b_node || task_of(b_node->device) == task_of(m.device))
      return false;
    auto b = shape_of(m.inputs[1]);
    auto a = shape_of(m.inputs[0]);
    auto ta = m.attr_or<bool>("transpose_a", false);
    if (b.rank() != 2 || a.rank() != 2 || a.dim(ta ? 0 : 1) != b.dim(0))
      return false;
    auto k = pieces_for(b.dim(0), bytes_of(b, m));
    if (k == 0)
      return false;
    auto bs = split(m.inputs[1], 0, k, b_node->device, m.attr<dtype>("T"),
                    m.name + "/_pipelined/split_b");
    auto pieces = block_products(m, k, ta ? 0 : 1, [&](int j) {
      return input_name(bs, j);
    });
    auto& sum = g_.nodes[i];
    sum.op = "AddN";
    sum.inputs = std::move(pieces);
    sum.attrs = {{"T", m.attr<dtype>("T")}, {"N", static_cast<int64_t>(k)}};
    return true;
  }

  // m = MatMul(a, b) [R, N] consumed on another task: its row blocks
  // MatMul(a_j, b) are sent one by one and joined where they are used.
  bool cut_result(size_t i) {
    auto m = g_.nodes[i];
    if (m.inputs.size() < 2)
      return false;
    auto own_task = task_of(m.device);
    // Consumers by device; whether m's own task uses it.
    std::map<std::string, std::vector<size_t>> remote;
    bool local = false;
    // Inputs come first, so no rewrite has touched m's consumers yet.
    if (auto users = consumers_.find(m.name); users != consumers_.end())
      for (auto c : users->second) {
        auto& dev = g_.nodes[c].device;
        if (task_of(dev) == own_task)
          local = true;
        else if (auto& list = remote[dev];
                 list.empty() || list.back() != c)
          list.push_back(c);
      }
    if (remote.empty())
      return false;
    auto out = shape_of(m.name);
    auto ta = m.attr_or<bool>("transpose_a", false);
    auto a = shape_of(m.inputs[0]);
    if (out.rank() != 2 || a.rank() != 2 || a.dim(ta ? 1 : 0) != out.dim(0))
      return false;
    auto k = pieces_for(out.dim(0), bytes_of(out, m));
    if (k == 0)
      return false;
    auto type = m.attr<dtype>("T");
    auto base = m.name + "/_pipelined/";
    auto pieces = block_products(m, k, ta ? 1 : 0,
                                 [&](int) { return m.inputs[1]; });
    auto concat = [&](node_def& c, const std::string& device) {
      c.op = "ConcatV2";
      c.device = device;
      c.inputs = pieces;
      c.inputs.push_back(add_const(c.name + "/axis", 0, device));
      c.attrs = {{"T", type}, {"N", static_cast<int64_t>(k)}};
    };
    for (auto& [dev, consumers] : remote) {
      std::vector<size_t> whole;
      for (auto ci : consumers)
        if (!apply_by_rows(ci, m.name, pieces, out.dim(0) / k))
          whole.push_back(ci);
      if (whole.empty())
        continue;
      node_def c;
      c.name = fresh(base + "concat");
      concat(c, dev);
      for (auto ci : whole)
        for (auto& in : g_.nodes[ci].inputs)
          if (auto ref = parse_input(in); ref.node == m.name)
            in = ref.control ? "^" + c.name : c.name;
      added_.push_back(std::move(c));
    }
    if (local)
      concat(g_.nodes[i], m.device);
    else
      removed_.insert(m.name);
    return true;
  }

  // A training op whose gradient is m and whose result only control edges
  // use becomes one update per row block of m, each as soon as its block
  // arrives, under a NoOp of the op's name. False (nothing changed) for
  // any other consumer.
  bool apply_by_rows(size_t c, const std::string& m,
                     const std::vector<std::string>& pieces, int64_t rows) {
    static const std::map<std::string_view, size_t> grad_input{
      {"ApplyGradientDescent", 2},
      {"ApplyMomentum", 3},
      {"ApplyAdagrad", 3},
      {"ApplyAdam", 9}};
    auto op = g_.nodes[c];
    auto g = grad_input.find(op.op);
    if (g == grad_input.end() || op.inputs.size() <= g->second)
      return false;
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      auto ref = parse_input(op.inputs[j]);
      auto is_grad = j == g->second;
      if ((ref.node == m) != is_grad || (is_grad && ref.index != 0))
        return false;
    }
    if (auto users = consumers_.find(op.name); users != consumers_.end())
      for (auto u : users->second)
        for (auto& in : g_.nodes[u].inputs)
          if (in == op.name || in.rfind(op.name + ":", 0) == 0)
            return false;
    auto& group = g_.nodes[c];
    group.op = "NoOp";
    group.inputs.clear();
    group.attrs.clear();
    for (size_t j = 0; j < pieces.size(); ++j) {
      node_def block = op;
      block.name = fresh(op.name + "/_pipelined/rows_" + std::to_string(j));
      block.inputs[g->second] = pieces[j];
      block.attrs["_row_begin"] = static_cast<int64_t>(j) * rows;
      group.inputs.push_back("^" + block.name);
      added_.push_back(std::move(block));
    }
    return true;
  }

  // Appends the new nodes and puts every node after its inputs again.
  void finish() {
    std::vector<node_def> all;
    all.reserve(g_.nodes.size() + added_.size());
    for (auto& n : g_.nodes)
      if (removed_.count(n.name) == 0)
        all.push_back(std::move(n));
    for (auto& n : added_)
      all.push_back(std::move(n));
    std::unordered_map<std::string, size_t> at;
    for (size_t i = 0; i < all.size(); ++i)
      at.emplace(all[i].name, i);
    std::vector<int> state(all.size(), 0); // 0 new, 1 open, 2 done
    std::vector<node_def> sorted;
    sorted.reserve(all.size());
    // Depth-first with an explicit stack: graphs can be deep.
    for (size_t root = 0; root < all.size(); ++root) {
      if (state[root] != 0)
        continue;
      std::vector<std::pair<size_t, size_t>> stack{{root, 0}};
      state[root] = 1;
      while (!stack.empty()) {
        auto& [n, next] = stack.back();
        if (next < all[n].inputs.size()) {
          auto in = at.find(parse_input(all[n].inputs[next++]).node);
          if (in != at.end() && state[in->second] == 0) {
            state[in->second] = 1;
            stack.emplace_back(in->second, 0);
          }
          continue;
        }
        state[n] = 2;
        sorted.push_back(std::move(all[n]));
        stack.pop_back();
      }
    }
    g_.nodes = std::move(sorted);
  }

  graph_def& g_;
  matmul_pipelining_options opts_;
  std::unordered_map<std::string, size_t> index_;
  std::unordered_map<std::string, std::vector<size_t>> consumers_;
  std::unordered_map<std::string, tensor_shape> shapes_;
  std::set<std::string> taken_;
  std::map<std::tuple<std::string, int, int, std::string>, std::string>
    splits_;
  std::vector<node_def> added_;
  std::set<std::string> removed_;
};

} // namespace

int pipeline_cut_matmuls(graph_def& placed,
                         const matmul_pipelining_options& opts) {
  if (opts.pieces < 2)
    return 0;
  return pipeliner{placed, opts}.run();
}

} // namespace actorflow
