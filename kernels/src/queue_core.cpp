#include "actorflow/kernels/queue_core.hpp"

#include "actorflow/graph/tensor_memory.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

namespace actorflow {

namespace {

constexpr int32_t unbounded_capacity = std::numeric_limits<int32_t>::max();

int32_t effective_capacity(int32_t capacity) {
  return capacity < 0 ? unbounded_capacity : capacity;
}

std::string join_types(const std::vector<dtype>& types) {
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += tf_type_name(types[i]);
  }
  return out;
}

// TF's ShapeListString: "[[1,1,2,3], []]"; no shapes prints as "[]".
std::string join_shapes(const std::vector<tensor_shape>& shapes) {
  std::string out = "[";
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += shapes[i].to_string();
  }
  return out + "]";
}

tensor_shape with_batch_dim(int64_t batch, const tensor_shape& shape) {
  std::vector<int64_t> dims{batch};
  dims.insert(dims.end(), shape.dims().begin(), shape.dims().end());
  return tensor_shape{std::move(dims)};
}

// Copies `count` consecutive elements; strings element-wise, everything else
// as raw bytes, so one routine serves every dtype.
void copy_elements(const tensor& src, int64_t src_offset, tensor& dst,
                   int64_t dst_offset, int64_t count) {
  if (count <= 0)
    return;
  if (src.type() == dtype::string) {
    auto from = src.flat<std::string>();
    auto to = dst.flat<std::string>();
    std::copy_n(from.begin() + src_offset, count, to.begin() + dst_offset);
    return;
  }
  auto width = dtype_size(src.type());
  std::memcpy(static_cast<char*>(dst.raw()) + dst_offset * width,
              static_cast<const char*>(src.raw()) + src_offset * width,
              static_cast<size_t>(count) * width);
}

// Copies `element` into row `row` of `batch`, whose rows have `row_dims`
// (each at least as large as the element's); the rest of the row keeps its
// zero fill, which is how PaddingFIFOQueue pads.
void copy_into_row(const tensor& element, tensor& batch, int64_t row,
                   const std::vector<int64_t>& row_dims) {
  int64_t row_size = 1;
  for (auto d : row_dims)
    row_size *= d;
  const auto& dims = element.shape().dims();
  if (dims == row_dims) {
    copy_elements(element, 0, batch, row * row_size, row_size);
    return;
  }
  if (element.num_elements() == 0)
    return;
  auto rank = dims.size();
  // Walk the element's index prefixes (all dims but the last) and copy one
  // contiguous run of the last dim per prefix.
  int64_t run = dims.back();
  std::vector<int64_t> index(rank - 1, 0);
  int64_t src_offset = 0;
  for (;;) {
    int64_t dst_offset = 0;
    for (size_t i = 0; i + 1 < rank; ++i)
      dst_offset = dst_offset * row_dims[i] + index[i];
    dst_offset = dst_offset * row_dims[rank - 1];
    copy_elements(element, src_offset, batch, row * row_size + dst_offset,
                  run);
    src_offset += run;
    size_t i = rank - 1;
    while (i > 0) {
      --i;
      if (++index[i] < dims[i])
        break;
      index[i] = 0;
      if (i == 0)
        return;
    }
    if (rank == 1)
      return;
  }
}

// Row `row` of an enqueue_many batch as a queue element. FIFO queues keep
// a view of the batch (no allocation or copy per element; the batch's
// buffer goes when its last element does, and FIFO order frees it soon).
// A RandomShuffleQueue copies: its elements leave in random order, and one
// element left from each of many batches would keep them all alive.
tensor slice_row(const tensor& batch, int64_t row, queue_kind kind) {
  auto view = batch.sub_slice(row);
  return kind == queue_kind::random_shuffle ? view.deep_copy() : view;
}

} // namespace

std::string_view to_string(queue_kind kind) {
  switch (kind) {
    case queue_kind::fifo:
      return "FIFOQueue";
    case queue_kind::padding_fifo:
      return "PaddingFIFOQueue";
    case queue_kind::random_shuffle:
      return "RandomShuffleQueue";
  }
  return "Queue";
}

status validate(const queue_options& opts) {
  if (opts.types.empty())
    return invalid_argument("Queue '" + opts.name
                            + "' needs at least one component type");
  if (opts.kind == queue_kind::padding_fifo) {
    if (opts.shapes.empty())
      return invalid_argument("When providing partial shapes, a list of "
                              "shapes must be provided.");
    if (opts.shapes.size() != opts.types.size())
      return invalid_argument(
        "Shapes must be provided for all components, but received "
        + std::to_string(opts.types.size()) + " dtypes and "
        + std::to_string(opts.shapes.size()) + " shapes.");
    for (const auto& s : opts.shapes)
      if (s.unknown_rank())
        return invalid_argument("All shapes must have a known rank: "
                                + join_shapes(opts.shapes));
  } else if (!opts.shapes.empty()) {
    if (opts.shapes.size() != opts.types.size())
      return invalid_argument(
        "Queue shapes must have the same length as dtypes");
    for (const auto& s : opts.shapes)
      if (!s.fully_defined())
        return invalid_argument("All shapes must be fully defined: "
                                + join_shapes(opts.shapes));
  }
  if (opts.kind == queue_kind::random_shuffle) {
    auto mad = std::to_string(opts.min_after_dequeue);
    if (opts.min_after_dequeue < 0)
      return invalid_argument("min_after_dequeue " + mad + " must be >= 0");
    auto capacity = effective_capacity(opts.capacity);
    if (opts.min_after_dequeue >= capacity)
      return invalid_argument("min_after_dequeue " + mad
                              + " must be < capacity "
                              + std::to_string(capacity));
  }
  return {};
}

status check_compatible(const queue_options& existing,
                        const queue_options& requested) {
  auto prefix = "Shared queue '" + existing.name + "' has ";
  if (existing.kind != requested.kind)
    return invalid_argument(prefix + "type '"
                            + std::string{to_string(existing.kind)}
                            + "' that does not match type of Node '"
                            + requested.name + "': "
                            + std::string{to_string(requested.kind)});
  auto capacity = effective_capacity(existing.capacity);
  auto requested_capacity = effective_capacity(requested.capacity);
  if (capacity != requested_capacity)
    return invalid_argument(prefix + "capacity " + std::to_string(capacity)
                            + " but requested capacity was "
                            + std::to_string(requested_capacity));
  if (existing.kind == queue_kind::random_shuffle) {
    if (existing.min_after_dequeue != requested.min_after_dequeue)
      return invalid_argument(
        prefix + "min_after_dequeue "
        + std::to_string(existing.min_after_dequeue)
        + " but requested min_after_dequeue was "
        + std::to_string(requested.min_after_dequeue));
    // (0, 0) asks for "any seed", so it matches whatever the queue has.
    bool any_seed = requested.seed == 0 && requested.seed2 == 0;
    if (!any_seed
        && (existing.seed != requested.seed
            || existing.seed2 != requested.seed2))
      return invalid_argument(
        prefix + "random seeds (" + std::to_string(existing.seed) + ", "
        + std::to_string(existing.seed2) + ") but requested seeds are ("
        + std::to_string(requested.seed) + ", "
        + std::to_string(requested.seed2) + ").");
  }
  if (existing.types != requested.types)
    return invalid_argument(prefix + "component types "
                            + join_types(existing.types)
                            + " but requested component types were "
                            + join_types(requested.types));
  bool shapes_match = existing.shapes.size() == requested.shapes.size();
  for (size_t i = 0; shapes_match && i < existing.shapes.size(); ++i)
    shapes_match = existing.kind == queue_kind::padding_fifo
                     ? existing.shapes[i].is_compatible_with(
                       requested.shapes[i])
                     : existing.shapes[i] == requested.shapes[i];
  if (!shapes_match)
    return invalid_argument(prefix + "component shapes "
                            + join_shapes(existing.shapes)
                            + " but requested component shapes were "
                            + join_shapes(requested.shapes));
  return {};
}

// -- queue_core ---------------------------------------------------------------

queue_core::queue_core(queue_options opts) : opts_(std::move(opts)) {
  opts_.capacity = effective_capacity(opts_.capacity);
  if (opts_.seed == 0 && opts_.seed2 == 0) {
    std::random_device rd;
    rng_.seed((static_cast<uint64_t>(rd()) << 32) ^ rd());
  } else {
    std::seed_seq seq{static_cast<uint64_t>(opts_.seed),
                      static_cast<uint64_t>(opts_.seed2)};
    rng_.seed(seq);
  }
}

queue_core::~queue_core() {
  cancel_all();
}

int32_t queue_core::size() const {
  return static_cast<int32_t>(elements_.size());
}

bool queue_core::is_closed() const {
  return closed_;
}

size_t queue_core::pending() const {
  return pending_enqueues() + pending_dequeues();
}

size_t queue_core::pending_enqueues() const {
  return enqueue_attempts_.size();
}

size_t queue_core::pending_dequeues() const {
  return dequeue_attempts_.size();
}

const queue_options& queue_core::options() const {
  return opts_;
}

std::vector<queue_core::tuple> queue_core::contents() const {
  std::vector<tuple> out;
  for (const auto& a : dequeue_attempts_)
    out.insert(out.end(), a.taken.begin(), a.taken.end());
  out.insert(out.end(), elements_.begin(), elements_.end());
  return out;
}

status queue_core::restore_contents(std::vector<tuple> elements,
                                    bool closed) {
  for (const auto& e : elements)
    if (auto err = validate_tuple(e); !err.ok())
      return invalid_argument("the state of " + std::string{type_name()}
                              + " '" + opts_.name
                              + "' holds an element that does not fit: "
                              + err.message());
  for (auto& a : dequeue_attempts_)
    a.taken.clear();
  elements_.assign(std::make_move_iterator(elements.begin()),
                   std::make_move_iterator(elements.end()));
  closed_ = closed;
  flush();
  deliver();
  return {};
}

std::string_view queue_core::type_name() const {
  return to_string(opts_.kind);
}

std::string queue_core::closed_message() const {
  return std::string{type_name()} + " '" + opts_.name + "' is closed.";
}

std::string queue_core::insufficient_message(int64_t requested,
                                             int64_t size) const {
  return std::string{type_name()} + " '" + opts_.name
         + "' is closed and has insufficient elements (requested "
         + std::to_string(requested) + ", current size " + std::to_string(size)
         + ")";
}

// -- validation ---------------------------------------------------------------

namespace {

status validate_common(const std::vector<dtype>& types,
                       const queue_core::tuple& values) {
  if (values.size() != types.size())
    return invalid_argument("Wrong number of components in tuple. Expected "
                            + std::to_string(types.size()) + ", got "
                            + std::to_string(values.size()));
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].type() != types[i])
      return invalid_argument(
        "Type mismatch in tuple component " + std::to_string(i) + ". Expected "
        + std::string{tf_type_name(types[i])} + ", got "
        + std::string{tf_type_name(values[i].type())});
  return {};
}

status shape_mismatch(size_t i, const tensor_shape& expected,
                      const tensor_shape& got) {
  return invalid_argument("Shape mismatch in tuple component "
                          + std::to_string(i) + ". Expected "
                          + expected.to_string() + ", got " + got.to_string());
}

// Whether a component of shape `got` fits where `expected` is declared:
// padding accepts any shape compatible with the partial one.
bool shape_accepted(queue_kind kind, const tensor_shape& expected,
                    const tensor_shape& got) {
  return kind == queue_kind::padding_fifo ? expected.is_compatible_with(got)
                                          : expected == got;
}

} // namespace

status queue_core::validate_tuple(const tuple& values) const {
  if (auto st = validate_common(opts_.types, values); !st.ok())
    return st;
  for (size_t i = 0; i < opts_.shapes.size(); ++i) {
    if (!shape_accepted(opts_.kind, opts_.shapes[i], values[i].shape()))
      return shape_mismatch(i, opts_.shapes[i], values[i].shape());
  }
  return {};
}

status queue_core::validate_many_tuple(const tuple& values) const {
  if (auto st = validate_common(opts_.types, values); !st.ok())
    return st;
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].shape().rank() < 1)
      return invalid_argument("Shape mismatch in tuple component "
                              + std::to_string(i)
                              + ". EnqueueMany needs a batch dimension, got "
                              + values[i].shape().to_string());
  auto batch = values[0].shape().dim(0);
  if (opts_.shapes.empty()) {
    for (size_t i = 1; i < values.size(); ++i)
      if (values[i].shape().dim(0) != batch)
        return invalid_argument(
          "All input tensors must have the same size in the 0th dimension. "
          "Component "
          + std::to_string(i) + " has "
          + std::to_string(values[i].shape().dim(0))
          + ", and should have " + std::to_string(batch));
    return {};
  }
  for (size_t i = 0; i < values.size(); ++i) {
    auto expected = with_batch_dim(batch, opts_.shapes[i]);
    if (!shape_accepted(opts_.kind, expected, values[i].shape()))
      return shape_mismatch(i, expected, values[i].shape());
  }
  return {};
}

// -- public operations --------------------------------------------------------

queue_core::attempt_id queue_core::enqueue(tuple values, done_fn done) {
  if (auto st = validate_tuple(values); !st.ok())
    return finish_now(std::move(done), std::move(st));
  attempt a;
  a.op = op_kind::enqueue;
  a.done = std::move(done);
  a.input = std::move(values);
  return add(std::move(a), true);
}

queue_core::attempt_id queue_core::enqueue_many(tuple batches, done_fn done) {
  if (auto st = validate_many_tuple(batches); !st.ok())
    return finish_now(std::move(done), std::move(st));
  // TF returns before looking at the closed flag for an empty batch.
  if (batches[0].shape().dim(0) == 0)
    return finish_now(std::move(done), {});
  attempt a;
  a.op = op_kind::enqueue_many;
  a.done = std::move(done);
  a.input = std::move(batches);
  return add(std::move(a), true);
}

queue_core::attempt_id queue_core::dequeue(done_fn done) {
  attempt a;
  a.op = op_kind::dequeue;
  a.done = std::move(done);
  a.requested = 1;
  return add(std::move(a), false);
}

queue_core::attempt_id queue_core::dequeue_many(int64_t n, done_fn done) {
  return start_dequeue_many(n, std::move(done), false);
}

queue_core::attempt_id queue_core::dequeue_up_to(int64_t n, done_fn done) {
  return start_dequeue_many(n, std::move(done), true);
}

queue_core::attempt_id
queue_core::start_dequeue_many(int64_t n, done_fn done,
                               bool allow_small_batch) {
  // Checked in this order by DequeueManyOp/DequeueUpToOp and TryDequeueMany.
  if (n < 0)
    return finish_now(std::move(done),
                      invalid_argument(std::string{allow_small_batch
                                                     ? "DequeueUpToOp"
                                                     : "DequeueManyOp"}
                                       + " requested n < 0 elements"));
  if (opts_.kind != queue_kind::padding_fifo && opts_.shapes.empty())
    return finish_now(
      std::move(done),
      invalid_argument(std::string{type_name()}
                       + "'s DequeueMany and DequeueUpTo require the "
                         "components to have specified shapes."));
  if (n == 0)
    return finish_now(std::move(done), {}, stack({}));
  attempt a;
  a.op = allow_small_batch ? op_kind::dequeue_up_to : op_kind::dequeue_many;
  a.done = std::move(done);
  a.requested = n;
  return add(std::move(a), false);
}

queue_core::attempt_id queue_core::close(bool cancel_pending_enqueues,
                                         done_fn done) {
  if (!cancel_pending_enqueues) {
    // Queued as an enqueue so that it runs after the pending enqueues.
    attempt a;
    a.op = op_kind::close;
    a.done = std::move(done);
    return add(std::move(a), true);
  }
  closed_ = true;
  for (auto& a : enqueue_attempts_)
    finish(a, status{error_code::cancelled, "Enqueue operation was cancelled"});
  enqueue_attempts_.clear();
  auto id = next_id_++;
  finished_.push_back({std::move(done), {}, {}});
  flush();
  deliver();
  return id;
}

void queue_core::cancel(attempt_id id) {
  auto remove = [&](std::deque<attempt>& attempts, const char* message) {
    auto i = std::find_if(attempts.begin(), attempts.end(),
                          [id](const attempt& a) { return a.id == id; });
    if (i == attempts.end())
      return false;
    restore(i->taken);
    finish(*i, status{error_code::cancelled, message});
    attempts.erase(i);
    return true;
  };
  if (!remove(enqueue_attempts_, "Enqueue operation was cancelled")
      && !remove(dequeue_attempts_, "Dequeue operation was cancelled"))
    return;
  // The cancelled attempt may have blocked others (e.g. a close behind an
  // enqueue, or dequeues behind a dequeue_many that returned elements).
  flush();
  deliver();
}

void queue_core::put_back(tuple values, bool batched) {
  if (values.empty())
    return;
  std::vector<tuple> rows;
  if (!batched) {
    rows.push_back(std::move(values));
  } else if (values[0].shape().rank() > 0) {
    for (int64_t r = 0; r < values[0].shape().dim(0); ++r) {
      tuple element;
      for (const auto& component : values)
        element.push_back(slice_row(component, r, opts_.kind));
      rows.push_back(std::move(element));
    }
  }
  restore(rows);
  flush();
  deliver();
}

void queue_core::cancel_all(const status& why) {
  // Restore in reverse so that the head attempt's elements end up first.
  for (auto i = dequeue_attempts_.rbegin(); i != dequeue_attempts_.rend(); ++i)
    restore(i->taken);
  auto or_default = [&](const char* text) {
    return why.ok() ? status{error_code::cancelled, text} : why;
  };
  for (auto& a : dequeue_attempts_)
    finish(a, or_default("Dequeue operation was cancelled"));
  dequeue_attempts_.clear();
  for (auto& a : enqueue_attempts_)
    finish(a, or_default("Enqueue operation was cancelled"));
  enqueue_attempts_.clear();
  deliver();
}

// -- attempt machinery --------------------------------------------------------

queue_core::attempt_id queue_core::add(attempt a, bool is_enqueue) {
  auto id = next_id_++;
  a.id = id;
  (is_enqueue ? enqueue_attempts_ : dequeue_attempts_).push_back(std::move(a));
  flush();
  deliver();
  return id;
}

queue_core::attempt_id queue_core::finish_now(done_fn done, status st,
                                              tuple result) {
  auto id = next_id_++;
  finished_.push_back({std::move(done), std::move(st), std::move(result)});
  deliver();
  return id;
}

void queue_core::finish(attempt& a, status st, tuple result) {
  finished_.push_back({std::move(a.done), std::move(st), std::move(result)});
}

void queue_core::deliver() {
  // Callbacks run after the state is consistent, and may call back into the
  // core; such a nested call delivers its own results.
  while (!finished_.empty()) {
    auto batch = std::move(finished_);
    finished_.clear();
    for (auto& f : batch)
      if (f.done)
        f.done(std::move(f.st), std::move(f.result));
  }
}

void queue_core::flush() {
  for (;;) {
    bool changed = try_attempts(enqueue_attempts_);
    changed = try_attempts(dequeue_attempts_) || changed;
    if (!changed)
      return;
  }
}

bool queue_core::try_attempts(std::deque<attempt>& attempts) {
  // Only the head runs, so each direction is served in arrival order.
  bool progress = false;
  while (!attempts.empty()) {
    switch (run(attempts.front())) {
      case run_result::no_progress:
        return progress;
      case run_result::progress:
        return true;
      case run_result::complete:
        progress = true;
        attempts.pop_front();
        break;
    }
  }
  return progress;
}

queue_core::run_result queue_core::run(attempt& a) {
  switch (a.op) {
    case op_kind::enqueue:
      return run_enqueue(a);
    case op_kind::enqueue_many:
      return run_enqueue_many(a);
    case op_kind::close:
      if (closed_) {
        finish(a, status{error_code::cancelled,
                         "Queue '" + opts_.name + "' is already closed."});
      } else {
        closed_ = true;
        finish(a, {});
      }
      return run_result::complete;
    case op_kind::dequeue:
      return run_dequeue(a);
    case op_kind::dequeue_many:
      return run_dequeue_many(a, false);
    case op_kind::dequeue_up_to:
      return run_dequeue_many(a, true);
  }
  return run_result::no_progress;
}

queue_core::run_result queue_core::run_enqueue(attempt& a) {
  if (closed_) {
    finish(a, status{error_code::cancelled, closed_message()});
    return run_result::complete;
  }
  if (elements_.size() >= static_cast<size_t>(opts_.capacity))
    return run_result::no_progress;
  elements_.push_back(std::move(a.input));
  finish(a, {});
  return run_result::complete;
}

queue_core::run_result queue_core::run_enqueue_many(attempt& a) {
  if (closed_) {
    finish(a, status{error_code::cancelled, closed_message()});
    return run_result::complete;
  }
  auto batch = a.input[0].shape().dim(0);
  auto result = run_result::no_progress;
  while (elements_.size() < static_cast<size_t>(opts_.capacity)) {
    result = run_result::progress;
    tuple element;
    element.reserve(a.input.size());
    for (const auto& component : a.input)
      element.push_back(slice_row(component, a.next_row, opts_.kind));
    elements_.push_back(std::move(element));
    if (++a.next_row == batch) {
      finish(a, {});
      return run_result::complete;
    }
  }
  return result;
}

queue_core::run_result queue_core::run_dequeue(attempt& a) {
  auto available = static_cast<int64_t>(elements_.size());
  if (available == 0 && closed_) {
    finish(a, status{error_code::out_of_range, insufficient_message(1, 0)});
    return run_result::complete;
  }
  if (opts_.kind == queue_kind::random_shuffle && !closed_)
    available -= opts_.min_after_dequeue;
  if (available <= 0)
    return run_result::no_progress;
  finish(a, {}, take_element());
  return run_result::complete;
}

queue_core::run_result queue_core::run_dequeue_many(attempt& a,
                                                    bool allow_small_batch) {
  auto wanted = static_cast<int64_t>(a.taken.size()) + a.requested;
  if (closed_ && static_cast<int64_t>(elements_.size()) < a.requested) {
    // TF's message counts what was still missing and the queue's size
    // before the partial batch goes back.
    auto message = insufficient_message(
      a.requested, static_cast<int64_t>(elements_.size()));
    restore(a.taken);
    a.requested = wanted;
    if (allow_small_batch && !elements_.empty()) {
      a.requested = static_cast<int64_t>(elements_.size());
    } else {
      // A pending enqueue may still deliver elements (it will fail or succeed
      // on its next run, which counts as progress), so wait for it.
      if (allow_small_batch && !enqueue_attempts_.empty())
        return run_result::no_progress;
      finish(a, status{error_code::out_of_range, std::move(message)});
      return run_result::complete;
    }
  }
  auto available = static_cast<int64_t>(elements_.size());
  if (opts_.kind == queue_kind::random_shuffle && !closed_)
    available -= opts_.min_after_dequeue;
  auto result = run_result::no_progress;
  for (; available > 0; --available) {
    result = run_result::progress;
    a.taken.push_back(take_element());
    if (--a.requested == 0) {
      // A padded batch's shape comes from the elements' dims: two empty
      // elements of shapes [2^40,0] and [0,2^40] pad to rows of 2^80
      // elements. Its tensor cannot be made (InvalidArgument, or
      // ResourceExhausted for one too large to allocate): the dequeue
      // fails, and its elements go back to the queue.
      status failed;
      tuple batch;
      try {
        auto what = "the batch of queue '" + opts_.name + "'";
        tensor_memory_check budget{what};
        batch = stack(a.taken);
      } catch (const op_error& e) {
        failed = e.get_status();
      } catch (const std::bad_alloc&) {
        failed = {error_code::resource_exhausted,
                  "OOM when allocating the batch of " + std::to_string(
                    a.taken.size())
                    + " elements of queue '" + opts_.name + "'"};
      }
      if (!failed.ok()) {
        restore(a.taken);
        finish(a, std::move(failed));
        return run_result::complete;
      }
      a.taken.clear();
      finish(a, {}, std::move(batch));
      return run_result::complete;
    }
  }
  return result;
}

queue_core::tuple queue_core::take_element() {
  if (opts_.kind == queue_kind::random_shuffle) {
    auto index = rng_() % elements_.size();
    std::swap(elements_[index], elements_.back());
    auto element = std::move(elements_.back());
    elements_.pop_back();
    return element;
  }
  auto element = std::move(elements_.front());
  elements_.pop_front();
  return element;
}

void queue_core::restore(std::vector<tuple>& taken) {
  if (opts_.kind == queue_kind::random_shuffle) {
    for (auto& element : taken)
      elements_.push_back(std::move(element));
  } else {
    for (auto i = taken.rbegin(); i != taken.rend(); ++i)
      elements_.push_front(std::move(*i));
  }
  taken.clear();
}

queue_core::tuple queue_core::stack(const std::vector<tuple>& elements) const {
  auto n = static_cast<int64_t>(elements.size());
  tuple out;
  out.reserve(opts_.types.size());
  for (size_t c = 0; c < opts_.types.size(); ++c) {
    // Fixed dims come from the queue's shape; each -1 dim (Padding) becomes
    // the largest size in this batch, 0 for an empty batch.
    std::vector<int64_t> row_dims;
    if (opts_.shapes.empty()) {
      row_dims = elements.at(0)[c].shape().dims();
    } else {
      row_dims = opts_.shapes[c].dims();
      for (size_t d = 0; d < row_dims.size(); ++d)
        if (row_dims[d] < 0) {
          row_dims[d] = 0;
          for (const auto& element : elements)
            row_dims[d] = std::max(row_dims[d], element[c].shape().dim(
                                                  static_cast<int>(d)));
        }
    }
    tensor_shape batch_shape = with_batch_dim(n, tensor_shape{row_dims});
    if (opts_.kind == queue_kind::fifo) {
      // Elements that one enqueue_many sliced off in order come back as
      // the view they were: no copy.
      std::vector<tensor> column;
      column.reserve(elements.size());
      for (const auto& element : elements)
        column.push_back(element[c]);
      if (auto joined = tensor::join_rows(column); joined.valid()) {
        out.push_back(std::move(joined));
        continue;
      }
    }
    // Padding needs the zero fill; other rows are overwritten whole.
    auto batch = opts_.kind == queue_kind::padding_fifo
                   ? tensor{opts_.types[c], batch_shape}
                   : tensor::uninitialized(opts_.types[c], batch_shape);
    for (int64_t row = 0; row < n; ++row)
      copy_into_row(elements[static_cast<size_t>(row)][c], batch, row,
                    row_dims);
    out.push_back(std::move(batch));
  }
  return out;
}

} // namespace actorflow
