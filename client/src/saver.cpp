#include "actorflow/client/saver.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/serialization/binary_object.hpp>
#include <boost/serialization/level.hpp>
#include <boost/serialization/tracking.hpp>

#include "actorflow/graph/device_name.hpp"
#include "actorflow/graph/text_util.hpp"
#include "actorflow/graph/wire.hpp"
#include "actorflow/client/session.hpp"


#include "checkpoint_files.hpp"

namespace fs = std::filesystem;

namespace actorflow {

using namespace checkpoint_files;

namespace {

// -- archive payloads (Boost.Serialization) -------------------------------------
//
// Strings and sequences go through `field`, which bounds every length read
// back by the payload size before allocating: even a payload that passed
// its CRC but was not written by us cannot make the loader allocate more
// than the file holds.

thread_local uint64_t load_limit = 0;

struct length_error_in_archive : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check_length(uint64_t n) {
  if (n > load_limit)
    throw length_error_in_archive("length " + std::to_string(n)
                                  + " exceeds the payload size "
                                  + std::to_string(load_limit));
}

template <class Ar, class T>
  requires std::is_arithmetic_v<T>
void field(Ar& ar, T& x) {
  ar & x;
}

template <class Ar>
void field(Ar& ar, std::string& s) {
  if constexpr (Ar::is_saving::value) {
    uint64_t n = s.size();
    ar & n;
    if (n > 0) {
      auto bytes = boost::serialization::make_binary_object(s.data(), s.size());
      ar & bytes;
    }
  } else {
    uint64_t n = 0;
    ar & n;
    check_length(n);
    s.resize(static_cast<size_t>(n));
    if (n > 0) {
      auto bytes = boost::serialization::make_binary_object(s.data(), s.size());
      ar & bytes;
    }
  }
}

template <class Ar, class T>
  requires std::is_class_v<T>
void field(Ar& ar, T& x) {
  ar & x;
}

template <class Ar, class T>
void field(Ar& ar, std::vector<T>& xs) {
  if constexpr (Ar::is_saving::value) {
    uint64_t n = xs.size();
    ar & n;
    for (auto& x : xs)
      field(ar, x);
  } else {
    uint64_t n = 0;
    ar & n;
    check_length(n);
    xs.clear();
    for (uint64_t i = 0; i < n; ++i) {
      T x{};
      field(ar, x);
      xs.push_back(std::move(x));
    }
  }
}

struct shard_desc {
  std::string device;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    field(ar, device);
  }
};

struct index_entry {
  std::string key;
  uint8_t type = 0;
  std::vector<int64_t> dims;
  uint32_t shard = 0;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    field(ar, key);
    field(ar, type);
    field(ar, dims);
    field(ar, shard);
  }
};

struct index_payload {
  std::vector<shard_desc> shards;
  std::vector<index_entry> entries;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    field(ar, shards);
    field(ar, entries);
  }
};

struct data_record {
  std::string key;
  /// The tensor, as wire's to_bytes.
  std::string value;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    field(ar, key);
    field(ar, value);
  }
};

struct data_payload {
  std::vector<data_record> records;
  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    field(ar, records);
  }
};

} // namespace
} // namespace actorflow

// Plain objects: no class information, version or tracking in the archive,
// so a payload holds only what `field` writes.
#define ACTORFLOW_CKPT_PLAIN(T)                                              \
  BOOST_CLASS_IMPLEMENTATION(T, boost::serialization::object_serializable) \
  BOOST_CLASS_TRACKING(T, boost::serialization::track_never)
ACTORFLOW_CKPT_PLAIN(actorflow::shard_desc)
ACTORFLOW_CKPT_PLAIN(actorflow::index_entry)
ACTORFLOW_CKPT_PLAIN(actorflow::index_payload)
ACTORFLOW_CKPT_PLAIN(actorflow::data_record)
ACTORFLOW_CKPT_PLAIN(actorflow::data_payload)
#undef ACTORFLOW_CKPT_PLAIN

namespace actorflow {
namespace {

template <class T>
std::string to_archive(T& x) {
  std::ostringstream os{std::ios::binary};
  {
    boost::archive::binary_oarchive ar{os, boost::archive::no_header};
    ar << x;
  }
  return std::move(os).str();
}

/// Loads `x` from `payload`; DataLoss naming `file` for whatever the
/// archive rejects.
template <class T>
void from_archive(const std::string& file, std::string_view payload, T& x) {
  struct limit_guard {
    uint64_t prev;
    explicit limit_guard(uint64_t n) : prev(load_limit) {
      load_limit = n;
    }
    ~limit_guard() {
      load_limit = prev;
    }
  } guard{payload.size()};
  std::string why;
  try {
    std::istringstream is{std::string{payload}, std::ios::binary};
    boost::archive::binary_iarchive ar{is, boost::archive::no_header};
    ar >> x;
    if (is.peek() != std::char_traits<char>::eof())
      why = "trailing bytes after the archive";
  } catch (const boost::archive::archive_exception& e) {
    why = std::string{"archive error: "} + e.what();
  } catch (const std::exception& e) {
    why = std::string{"archive error: "} + e.what();
  }
  if (!why.empty())
    data_loss(file, why);
}

std::string shard_device(const variable& v) {
  device_name dn;
  if (!device_name::parse(v.device(), dn).ok())
    return v.device();
  device_name key;
  key.job = dn.job;
  key.replica = dn.replica;
  key.task = dn.task;
  return key.to_string();
}

} // namespace

// -- saver --------------------------------------------------------------------------

saver::saver(saver_options opts) : opts_(std::move(opts)) {
  vars_ = opts_.var_list.empty() ? global_variables() : opts_.var_list;
  opts_.var_list.clear();
  if (vars_.empty())
    invalid("No variables to save");
  auto names = std::move(opts_.var_names);
  opts_.var_names.clear();
  if (!names.empty() && names.size() != vars_.size())
    invalid("saver: " + std::to_string(names.size()) + " var_names for "
            + std::to_string(vars_.size()) + " variables");
  for (auto& v : vars_)
    if (!v.valid())
      invalid("saver: var_list holds an invalid variable");
  graph_ = vars_.front().op().owner();
  std::set<std::string> seen;
  for (size_t i = 0; i < vars_.size(); ++i) {
    auto& v = vars_[i];
    if (v.op().owner() != graph_)
      invalid("saver: variables " + vars_.front().op().name() + " and "
              + v.op().name() + " belong to different graphs");
    auto key = names.empty() ? v.op().name() : std::move(names[i]);
    if (key.empty())
      invalid("saver: the name of variable " + v.op().name()
              + " in var_names is empty");
    if (!seen.insert(key).second)
      invalid("At least two variables have the same name: " + key);
    keys_.push_back(std::move(key));
  }
  auto as_default = graph_->as_default();
  control_dependencies no_deps{nullptr};
  name_scope scope{opts_.name};
  std::vector<operation> assigns;
  for (auto& v : vars_) {
    colocate_with near{v.op()};
    auto shape = v.shape();
    auto value = placeholder(v.type(), shape);
    auto assign = v.assign(value, shape.fully_defined());
    restore_feeds_.push_back(value);
    assigns.push_back(assign.op());
  }
  restore_all_ = group(assigns, "restore_all");
}

saver::~saver() = default;

std::string saver::save(session& sess, const std::string& save_path,
                        int64_t global_step) {
  return save_impl(sess, save_path, nullptr, global_step);
}

std::string saver::save(session& sess, const std::string& save_path,
                        const variable& global_step) {
  if (!global_step.valid())
    invalid("saver: invalid global_step variable");
  return save_impl(sess, save_path, &global_step, -1);
}

std::string saver::save_impl(session& sess, const std::string& save_path,
                             const variable* step_var, int64_t global_step) {
  if (save_path.empty())
    invalid("Can't save: save_path is empty.");
  auto save_dir = dir_of(save_path);
  std::error_code ec;
  if (!fs::is_directory(save_dir.empty() ? fs::path{"."} : fs::path{save_dir},
                        ec))
    invalid("Parent directory of " + save_path
            + " doesn't exist, can't save.");
  // One step fetches every value (and the step, if asked for).
  std::vector<fetch> fetches;
  for (auto& v : vars_)
    fetches.emplace_back(v);
  size_t step_slot = 0;
  if (step_var != nullptr) {
    auto it = std::find_if(vars_.begin(), vars_.end(), [&](const variable& v) {
      return v.op() == step_var->op();
    });
    step_slot = static_cast<size_t>(it - vars_.begin());
    if (it == vars_.end())
      fetches.emplace_back(*step_var);
  }
  auto values = sess.run(fetches);
  std::string ckpt = save_path;
  if (step_var != nullptr) {
    auto& t = values.at(step_slot);
    if (t.type() == dtype::int64 && t.num_elements() == 1)
      global_step = t.scalar_value<int64_t>();
    else if (t.type() == dtype::int32 && t.num_elements() == 1)
      global_step = t.scalar_value<int32_t>();
    else
      invalid("saver: global_step " + step_var->op().name()
              + " must be an integer scalar, got "
              + std::string{to_string(t.type())} + " "
              + t.shape().to_string());
    ckpt += "-" + std::to_string(global_step);
  } else if (global_step >= 0) {
    ckpt += "-" + std::to_string(global_step);
  }
  auto state_file = join(dir_of(ckpt), "checkpoint");
  if (ckpt == state_file)
    invalid("Save path '" + ckpt
            + "' conflicts with path used for checkpoint state.  Please use "
              "a different save path.");
  for (size_t i = 0; i < vars_.size(); ++i) {
    auto& t = values[i];
    if (!t.valid() || t.type() != vars_[i].type())
      fail(error_code::internal,
           "saver: the value fetched for " + keys_[i] + " has dtype "
             + std::string{to_string(t.type())} + ", expected "
             + std::string{to_string(vars_[i].type())});
  }
  // Group by device, in the order of the sorted device names.
  std::map<std::string, std::vector<size_t>> by_device;
  for (size_t i = 0; i < vars_.size(); ++i)
    by_device[opts_.sharded ? shard_device(vars_[i]) : std::string{}]
      .push_back(i);
  auto count = static_cast<uint32_t>(by_device.size());
  frame_info info;
  info.id = random_u64();
  info.count = count;
  // A checkpoint under this name exists: its files stay untouched until
  // the new index replaces its index in one rename, so the new shards get
  // names of their own (with the new id). Otherwise TF's names.
  bool named = file_exists(ckpt + ".index");
  auto shard_name = [&](uint32_t i) {
    return named ? data_file(ckpt, i, count, info.id)
                 : data_file(ckpt, i, count);
  };
  // The shards, then the index last, in one rename: until it is in place
  // the new checkpoint does not exist for latest_checkpoint and restore,
  // and the one it replaces is whole. Shards written before a failure are
  // removed again.
  std::vector<std::string> written;
  auto write_files = [&] {
    index_payload index;
    uint32_t shard = 0;
    for (auto& [device, members] : by_device) {
      index.shards.push_back(shard_desc{device});
      data_payload data;
      for (auto i : members) {
        data.records.push_back(data_record{keys_[i], to_bytes(values[i])});
        index_entry e;
        e.key = keys_[i];
        e.type = static_cast<uint8_t>(values[i].type());
        e.dims = values[i].shape().dims();
        e.shard = shard;
        index.entries.push_back(std::move(e));
      }
      info.kind = kind_data;
      info.shard = shard;
      auto file = shard_name(shard);
      write_atomically(file, frame(info, to_archive(data)));
      written.push_back(std::move(file));
      ++shard;
    }
    std::sort(index.entries.begin(), index.entries.end(),
              [](const index_entry& x, const index_entry& y) {
                return x.key < y.key;
              });
    info.kind = kind_index;
    info.flags = named ? flag_named_shards : 0;
    info.shard = 0;
    // The shards' renames are durable before the index names them.
    sync_dir(dir_of(ckpt));
    write_atomically(ckpt + ".index", frame(info, to_archive(index)));
  };
  try {
    write_files();
  } catch (...) {
    std::error_code ignored;
    for (auto& f : written)
      fs::remove(f, ignored);
    throw;
  }
  sync_dir(dir_of(ckpt));
  // The shards of the checkpoint this one replaced, and of earlier
  // interrupted saves under this name.
  remove_data_files(ckpt, [&](const data_file_name& f) {
    return f.count != count || f.has_id != named
           || (named && f.id != info.id);
  });
  // TF's _RecordLastCheckpoint, update_checkpoint_state_internal and
  // _MaybeDeleteOldCheckpoints, in that order.
  // The list changes only once the state file names the new checkpoint.
  auto kept = last_checkpoints_;
  std::vector<std::string> doomed;
  if (opts_.max_to_keep > 0) {
    std::erase(kept, ckpt);
    kept.push_back(ckpt);
    while (kept.size() > static_cast<size_t>(opts_.max_to_keep)) {
      doomed.push_back(kept.front());
      kept.erase(kept.begin());
    }
  }
  update_checkpoint_state(save_dir, ckpt, kept, opts_.save_relative_paths);
  last_checkpoints_ = std::move(kept);
  last_restored_.clear();
  for (auto& p : doomed)
    remove_checkpoint(p);
  return ckpt;
}

namespace {

/// A checkpoint's files are missing, unreadable or damaged (as opposed to
/// a checkpoint that does not fit the saver's variables, or a failed
/// session step): restore_newest tries an older checkpoint then.
class damaged_checkpoint : public op_error {
public:
  using op_error::op_error;
  explicit damaged_checkpoint(const op_error& e) : op_error(e.get_status()) {
    // nop
  }
};

/// Runs `f`, turning its op_errors into damaged_checkpoint.
template <class F>
decltype(auto) reading_files(F&& f) {
  try {
    return f();
  } catch (const damaged_checkpoint&) {
    throw;
  } catch (const op_error& e) {
    throw damaged_checkpoint{e};
  }
}

} // namespace

std::vector<tensor> saver::load(const std::string& save_path) const {
  if (save_path.empty())
    invalid("Can't load save_path when it is empty.");
  auto index_file = save_path + ".index";
  frame_info index_info;
  index_payload index;
  reading_files([&] {
    if (!file_exists(index_file))
      invalid("The passed save_path is not a valid checkpoint: " + save_path);
    auto index_bytes = read_file(index_file);
    auto index_raw = unframe(index_file, index_bytes, kind_index, index_info);
    from_archive(index_file, index_raw, index);
  });
  // The index must describe a consistent checkpoint.
  auto count = index_info.count;
  std::unordered_map<std::string, const index_entry*> entries;
  reading_files([&] {
    if (count == 0 || index.shards.size() != count)
      data_loss(index_file, "lists " + std::to_string(index.shards.size())
                              + " shards, the header says "
                              + std::to_string(count));
    for (auto& e : index.entries) {
      if (e.shard >= count)
        data_loss(index_file, "entry " + e.key + " names shard "
                                + std::to_string(e.shard) + " of "
                                + std::to_string(count));
      if (!known_dtype(e.type))
        data_loss(index_file, "entry " + e.key + " has unknown dtype "
                                + std::to_string(e.type));
      if (std::any_of(e.dims.begin(), e.dims.end(),
                      [](int64_t d) { return d < 0; }))
        data_loss(index_file, "entry " + e.key + " has a negative dimension");
      if (!entries.emplace(e.key, &e).second)
        data_loss(index_file, "duplicate entry " + e.key);
    }
  });
  // Every variable must be there with its dtype and shape.
  std::vector<const index_entry*> wanted;
  std::map<uint32_t, std::vector<size_t>> by_shard;
  for (size_t i = 0; i < vars_.size(); ++i) {
    auto& key = keys_[i];
    auto it = entries.find(key);
    if (it == entries.end())
      fail(error_code::not_found, "Key " + key
                                    + " not found in checkpoint "
                                    + save_path);
    auto& e = *it->second;
    auto want = vars_[i].type();
    auto have = static_cast<dtype>(e.type);
    if (want != have)
      invalid("tensor_name = " + key + "; expected dtype "
              + std::string{tf_type_name(want)}
              + " does not equal original dtype "
              + std::string{tf_type_name(have)} + " (checkpoint "
              + save_path + ")");
    auto lhs = vars_[i].shape();
    tensor_shape rhs{e.dims};
    if (lhs.fully_defined() ? !(lhs == rhs) : !lhs.is_compatible_with(rhs))
      invalid("Assign requires shapes of both tensors to match. lhs shape= "
              + lhs.to_string() + " rhs shape= " + rhs.to_string()
              + " (restoring " + key + " from " + save_path + ")");
    wanted.push_back(&e);
    by_shard[e.shard].push_back(i);
  }
  // Read and check the shards holding them.
  bool named = (index_info.flags & flag_named_shards) != 0;
  std::vector<tensor> restored(vars_.size());
  reading_files([&] {
    for (auto& [shard, members] : by_shard) {
      auto file = named ? data_file(save_path, shard, count, index_info.id)
                        : data_file(save_path, shard, count);
      auto bytes = read_file(file);
      frame_info info;
      auto raw = unframe(file, bytes, kind_data, info);
      if (info.id != index_info.id)
        data_loss(file, "the shard belongs to another save than "
                          + index_file + " (checkpoint id "
                          + hex16(info.id) + " vs. " + hex16(index_info.id)
                          + ")");
      if (info.shard != shard || info.count != count)
        data_loss(file, "the header says shard " + std::to_string(info.shard)
                          + " of " + std::to_string(info.count));
      data_payload data;
      from_archive(file, raw, data);
      std::unordered_map<std::string, const data_record*> records;
      for (auto& r : data.records)
        if (!records.emplace(r.key, &r).second)
          data_loss(file, "duplicate record " + r.key);
      for (auto i : members) {
        auto& key = keys_[i];
        auto it = records.find(key);
        if (it == records.end())
          data_loss(file, "no record for " + key + ", which "
                            + index_file + " places there");
        tensor t;
        auto st = from_bytes(it->second->value, t);
        if (!st.ok())
          data_loss(file, key + ": " + st.message());
        auto& e = *wanted[i];
        if (t.type() != static_cast<dtype>(e.type)
            || !(t.shape() == tensor_shape{e.dims}))
          data_loss(file,
                    key + " holds a " + std::string{to_string(t.type())}
                      + " " + t.shape().to_string() + " tensor, the index says "
                      + std::string{to_string(static_cast<dtype>(e.type))}
                      + " " + tensor_shape{e.dims}.to_string());
        restored[i] = std::move(t);
      }
    }
  });
  return restored;
}

void saver::restore(session& sess, const std::string& save_path) {
  auto restored = load(save_path);
  feed_dict feeds;
  feeds.reserve(vars_.size());
  for (size_t i = 0; i < vars_.size(); ++i)
    feeds.emplace_back(restore_feeds_[i], std::move(restored[i]));
  sess.run(std::vector<fetch>{restore_all_}, feeds);
  last_restored_ = save_path;
}

std::string
saver::restore_newest(session& sess, const std::string& checkpoint_dir,
                      const std::function<void(const std::string&)>& log) {
  auto say = [&](const std::string& line) {
    if (log)
      log(line);
  };
  auto st = get_checkpoint_state(checkpoint_dir);
  if (!st)
    return {};
  // Newest first: the state file's latest, then the others it lists from
  // the newest back.
  std::vector<std::string> candidates{st->model_checkpoint_path};
  for (auto it = st->all_model_checkpoint_paths.rbegin();
       it != st->all_model_checkpoint_paths.rend(); ++it)
    if (std::find(candidates.begin(), candidates.end(), *it)
        == candidates.end())
      candidates.push_back(*it);
  // None of them exists: no checkpoint (TF's latest_checkpoint is None).
  if (std::none_of(candidates.begin(), candidates.end(), checkpoint_exists))
    return {};
  std::optional<op_error> newest_error;
  std::string others;
  for (size_t i = 0; i < candidates.size(); ++i) {
    auto& path = candidates[i];
    try {
      if (!checkpoint_exists(path))
        throw damaged_checkpoint{error_code::not_found,
                                 "no index file " + path + ".index"};
      say("Restoring parameters from " + path);
      restore(sess, path);
      return path;
    } catch (const damaged_checkpoint& e) {
      if (!newest_error)
        newest_error = e;
      else
        others += std::string{"; "} + e.what();
      if (i + 1 < candidates.size())
        say("Could not restore checkpoint " + path + " (" + e.what()
            + "): trying the next newest, " + candidates[i + 1]);
    }
  }
  fail(newest_error->code(),
       "No checkpoint in " + checkpoint_dir + " restores: "
         + std::string{newest_error->get_status().message()}
         + (others.empty() ? std::string{}
                           : " (and the older ones: " + others.substr(2)
                               + ")"));
}

void saver::recover_last_checkpoints(const std::vector<std::string>& paths) {
  last_checkpoints_.clear();
  for (auto& p : paths)
    if (checkpoint_exists(p)) {
      std::erase(last_checkpoints_, p);
      last_checkpoints_.push_back(p);
    }
}

} // namespace actorflow
