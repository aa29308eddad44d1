#include "actorflow/client/coordinator.hpp"

#include <algorithm>

namespace actorflow {

coordinator::coordinator(std::vector<error_code> clean_stop_codes)
  : clean_stop_codes_(std::move(clean_stop_codes)) {
  // nop
}

coordinator::~coordinator() {
  request_stop();
  std::vector<slot_ptr> slots;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    slots = std::move(registered_);
    slots.insert(slots.end(), leftovers_.begin(), leftovers_.end());
    registered_.clear();
    leftovers_.clear();
  }
  // The threads may still lock mtx_ (thread_finished, should_stop): join
  // without holding it. Members stay alive until this body returns.
  for (auto& slot : slots)
    if (slot->thread.joinable())
      slot->thread.join();
}

// -- stopping -----------------------------------------------------------------

bool coordinator::is_clean_stop(const std::exception_ptr& ex) const {
  try {
    std::rethrow_exception(ex);
  } catch (const op_error& e) {
    return std::find(clean_stop_codes_.begin(), clean_stop_codes_.end(),
                     e.code())
           != clean_stop_codes_.end();
  } catch (...) {
    return false;
  }
}

void coordinator::request_stop() {
  request_stop(nullptr);
}

void coordinator::request_stop(std::exception_ptr ex) {
  if (ex && is_clean_stop(ex))
    ex = nullptr;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!joined_ || !ex) {
      if (!stop_requested_) {
        if (ex && !exc_)
          exc_ = ex;
        stop_requested_ = true;
        cv_.notify_all();
      }
      return;
    }
  }
  // Joined already: nobody would see the exception any more.
  std::rethrow_exception(ex);
}

bool coordinator::should_stop() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return stop_requested_;
}

bool coordinator::wait_for_stop() const {
  std::unique_lock<std::mutex> lock{mtx_};
  cv_.wait(lock, [this] { return stop_requested_; });
  return true;
}

bool coordinator::wait_for_stop(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock{mtx_};
  return cv_.wait_for(lock, timeout, [this] { return stop_requested_; });
}

void coordinator::clear_stop() {
  std::lock_guard<std::mutex> guard{mtx_};
  joined_ = false;
  exc_ = nullptr;
  stop_requested_ = false;
}

void coordinator::raise_requested_exception() const {
  if (auto ex = requested_exception())
    std::rethrow_exception(ex);
}

std::exception_ptr coordinator::requested_exception() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return exc_;
}

bool coordinator::joined() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return joined_;
}

// -- threads ------------------------------------------------------------------

std::string coordinator::next_name(std::string name) {
  ++thread_counter_;
  if (name.empty())
    name = "Thread-" + std::to_string(thread_counter_);
  return name;
}

void coordinator::mark_done(thread_slot& slot) {
  slot.done = true;
  cv_.notify_all();
}

void coordinator::start_thread(std::string name, std::function<void()> body) {
  auto slot = std::make_shared<thread_slot>();
  std::lock_guard<std::mutex> guard{mtx_};
  slot->name = next_name(std::move(name));
  // The thread locks mtx_ only when it ends, after we released it.
  slot->thread = std::thread{[this, slot, body = std::move(body)] {
    try {
      run_guarded(body);
    } catch (...) {
      // request_stop rethrows after join(); nobody is left to tell.
    }
    std::lock_guard<std::mutex> done_guard{mtx_};
    mark_done(*slot);
  }};
  slot->id = slot->thread.get_id();
  registered_.push_back(std::move(slot));
}

void coordinator::register_thread(std::thread t, std::string name) {
  auto slot = std::make_shared<thread_slot>();
  std::lock_guard<std::mutex> guard{mtx_};
  slot->name = next_name(std::move(name));
  slot->id = t.get_id();
  slot->thread = std::move(t);
  if (!slot->thread.joinable()) {
    slot->done = true;
  } else {
    auto early = std::find(finished_early_.begin(), finished_early_.end(),
                           slot->id);
    if (early != finished_early_.end()) {
      finished_early_.erase(early);
      slot->done = true;
    }
  }
  registered_.push_back(std::move(slot));
  cv_.notify_all();
}

void coordinator::thread_finished() {
  auto self = std::this_thread::get_id();
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto* list : {&registered_, &leftovers_})
    for (auto& slot : *list)
      if (slot->id == self && !slot->done) {
        mark_done(*slot);
        return;
      }
  finished_early_.push_back(self);
}

void coordinator::join(std::chrono::milliseconds stop_grace_period,
                       bool ignore_live_threads) {
  std::unique_lock<std::mutex> lock{mtx_};
  // Threads registered after this point are not waited for (but are still
  // joined or kept below), as TF copies the set.
  auto threads = registered_;
  auto all_done = [&threads] {
    return std::all_of(threads.begin(), threads.end(),
                       [](const slot_ptr& s) { return s->done; });
  };
  cv_.wait(lock, [&] { return stop_requested_ || all_done(); });
  if (!all_done()) {
    auto deadline = std::chrono::steady_clock::now() + stop_grace_period;
    cv_.wait_until(lock, deadline, all_done);
  }
  std::string stragglers;
  for (auto& slot : threads)
    if (!slot->done) {
      if (!stragglers.empty())
        stragglers += ' ';
      stragglers += slot->name;
    }
  joined_ = true;
  std::vector<std::thread> finished;
  for (auto& slot : registered_) {
    if (slot->done)
      finished.push_back(std::move(slot->thread));
    else
      leftovers_.push_back(slot);
  }
  registered_.clear();
  // Reap earlier stragglers that ended since.
  auto ended = std::stable_partition(leftovers_.begin(), leftovers_.end(),
                                     [](const slot_ptr& s) {
                                       return !s->done;
                                     });
  for (auto i = ended; i != leftovers_.end(); ++i)
    finished.push_back(std::move((*i)->thread));
  leftovers_.erase(ended, leftovers_.end());
  auto ex = exc_;
  lock.unlock();
  // These have marked themselves done: joining waits at most for their
  // last instructions.
  for (auto& t : finished)
    if (t.joinable())
      t.join();
  if (ex)
    std::rethrow_exception(ex);
  if (!stragglers.empty() && !ignore_live_threads)
    throw op_error(error_code::internal,
                   "Coordinator stopped with threads still running: "
                     + stragglers);
}

} // namespace actorflow
