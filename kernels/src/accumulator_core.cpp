#include <algorithm>
#include "actorflow/kernels/accumulator_core.hpp"

#include <utility>
#include <vector>

namespace actorflow {

namespace {

template <class T>
void add_into(tensor& sum, const tensor& x) {
  auto s = sum.flat<T>();
  auto v = x.flat<T>();
  for (size_t i = 0; i < s.size(); ++i)
    s[i] += v[i];
}

template <class T>
tensor scaled(const tensor& sum, double factor) {
  tensor out{sum.type(), sum.shape()};
  auto s = sum.flat<T>();
  auto o = out.flat<T>();
  for (size_t i = 0; i < s.size(); ++i)
    o[i] = static_cast<T>(s[i] * factor);
  return out;
}

} // namespace

status validate(const accumulator_options& opts) {
  if (opts.type != dtype::float32 && opts.type != dtype::float64)
    return invalid_argument("ConditionalAccumulator " + opts.name
                            + " needs float32 or float64, not "
                            + std::string{to_string(opts.type)});
  if (opts.reduction_type != "MEAN" && opts.reduction_type != "SUM")
    return invalid_argument("Unsupported reduction type " + opts.reduction_type
                            + " for ConditionalAccumulator " + opts.name);
  return {};
}

accumulator_core::accumulator_core(accumulator_options opts)
  : opts_(std::move(opts)) {
}

accumulator_core::~accumulator_core() {
  cancel_all();
}

status accumulator_core::apply(const tensor& grad, int64_t local_step,
                               const std::string& replica) {
  if (grad.type() != opts_.type)
    return invalid_argument("Gradient for " + opts_.name + " has dtype "
                            + std::string{to_string(grad.type())}
                            + ", the accumulator holds "
                            + std::string{to_string(opts_.type)});
  auto& expected = count_ > 0 ? sum_.shape() : opts_.shape;
  if (!grad.shape().is_compatible_with(expected))
    return invalid_argument("Shape mismatch: expected " + expected.to_string()
                            + ", got " + grad.shape().to_string() + " ("
                            + opts_.name + ")");
  if (!replica.empty())
    replicas_[replica] = {replica, local_step, clock::now()};
  if (local_step < global_step_)
    return {}; // stale: dropped, as TF does
  if (count_ == 0) {
    sum_ = grad.deep_copy();
  } else if (opts_.type == dtype::float32) {
    add_into<float>(sum_, grad);
  } else {
    add_into<double>(sum_, grad);
  }
  ++count_;
  serve();
  return {};
}

accumulator_core::attempt_id accumulator_core::take(int32_t num_required,
                                                    done_fn done) {
  auto id = next_id_++;
  if (num_required < 1) {
    done(invalid_argument("Argument num_required must be positive, but was "
                          + std::to_string(num_required)),
         {});
    return id;
  }
  takes_.push_back({id, num_required, std::move(done)});
  serve();
  return id;
}

void accumulator_core::serve() {
  // Callbacks run after the state changed, and may call back in.
  std::vector<std::pair<done_fn, tensor>> ready;
  while (!takes_.empty() && count_ >= takes_.front().required) {
    auto a = std::move(takes_.front());
    takes_.pop_front();
    auto factor = opts_.reduction_type == "SUM" ? 1.0 : 1.0 / count_;
    auto result = opts_.type == dtype::float32 ? scaled<float>(sum_, factor)
                                               : scaled<double>(sum_, factor);
    count_ = 0;
    sum_ = tensor{};
    ++global_step_;
    ready.emplace_back(std::move(a.done), std::move(result));
  }
  for (auto& [done, value] : ready)
    done({}, std::move(value));
}

status accumulator_core::set_num_required(int32_t n) {
  if (n < 1)
    return invalid_argument("Argument num_required must be positive, but was "
                            + std::to_string(n));
  for (auto& a : takes_)
    a.required = std::min(a.required, n);
  serve();
  return {};
}

void accumulator_core::cancel(attempt_id id) {
  for (auto i = takes_.begin(); i != takes_.end(); ++i)
    if (i->id == id) {
      auto done = std::move(i->done);
      takes_.erase(i);
      done({error_code::cancelled, "TakeGrad operation was cancelled"}, {});
      return;
    }
}

void accumulator_core::cancel_all(const status& why) {
  auto pending = std::move(takes_);
  takes_.clear();
  for (auto& a : pending)
    a.done(why.ok() ? status{error_code::cancelled,
                             "TakeGrad operation was cancelled"}
                    : why,
           {});
}

std::vector<accumulator_core::replica_info>
accumulator_core::replicas() const {
  std::vector<replica_info> out;
  out.reserve(replicas_.size());
  for (const auto& [name, info] : replicas_)
    out.push_back(info);
  return out;
}

accumulator_core::snapshot_data accumulator_core::snapshot() const {
  snapshot_data out;
  out.sum = sum_;
  out.count = count_;
  out.global_step = global_step_;
  for (const auto& [name, info] : replicas_)
    out.replicas.emplace_back(name, info.last_step);
  return out;
}

status accumulator_core::restore(snapshot_data data) {
  if (data.count < 0 || (data.count > 0) != data.sum.valid())
    return invalid_argument("the state of accumulator " + opts_.name
                            + " has " + std::to_string(data.count)
                            + " gradients and "
                            + (data.sum.valid() ? "a" : "no") + " sum");
  if (data.sum.valid()
      && (data.sum.type() != opts_.type
          || !data.sum.shape().is_compatible_with(opts_.shape)))
    return invalid_argument("the state of accumulator " + opts_.name
                            + " holds a " + data.sum.shape().to_string()
                            + " sum of "
                            + std::string{to_string(data.sum.type())});
  sum_ = std::move(data.sum);
  count_ = data.count;
  global_step_ = data.global_step;
  replicas_.clear();
  auto now = clock::now();
  for (auto& [name, step] : data.replicas)
    replicas_[name] = {name, step, now};
  serve();
  return {};
}

void accumulator_core::set_global_step(int64_t step) {
  // Going back is allowed, as in TF: a chief restored from an older
  // checkpoint must not find every fresh gradient stale.
  global_step_ = step;
}

} // namespace actorflow
