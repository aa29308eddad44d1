#pragma once

// An actorflow program's command line: a CLI::App with the flags every
// program takes, declared here once, to which the program adds its own:
//
//   command_line cl{"actorflow-node", "Runs one task of a cluster ..."};
//   cl.app().add_option("--parent-pid", pid, "exit when ...")
//     ->type_name("PID")->check(process_id());
//   if (!cl.parse(argc, argv))
//     return 0;                         // --help: CLI11 wrote the help
//   cl.apply();                         // log level, CAF, TLS
//
// Every program takes, besides its own flags:
// - `--config-file FILE`: an INI file (';' comments, and lines starting
//   with '#'). Its [actorflow] section holds the program's flags
//   (`train_steps = 2000`, `model = "mlp"`, `sync = true`; the command
//   line wins); its other sections are CAF's ([scheduler], [middleman],
//   ..., also spelled [caf.scheduler]).
// - `--caf.<option>=<value>`: one of CAF's options
//   (`--caf.scheduler.max-threads=2`), given to the process-wide actor
//   system as CAF 0.17 spells it ("--scheduler.max-threads=2").
// - `--log_level LEVEL` (log.hpp).
// - the TLS flags (`--tls_cert FILE`, ...; client/runtime.hpp's
//   tls_config), over TF_CONFIG's "tls" object.
// - `--file_roots DIR,...`: the directories the ops of the process may
//   open files in (kernels/file_policy.hpp; default: anywhere). The TLS
//   files and --config-file are denied to every op whatever the roots.
// Errors are usage_error naming the flag, key or file: an unknown flag, a
// flag given twice, a missing value, a value its validator refuses (on the
// command line or in [actorflow]), an unknown key in [actorflow], a CAF
// value of the wrong type or out of range (configure_default_system), a
// file that cannot be read or is a directory.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "actorflow/client/runtime.hpp"
#include "actorflow/support/flags.hpp"

namespace actorflow::support {

/// The flags every program takes (but CAF's, which CLI11 never sees).
struct common_flags {
  std::optional<std::string> config_file;
  std::string log_level = "info";
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  std::optional<std::string> tls_key_passphrase;
  std::optional<std::string> tls_ca;
  std::optional<std::string> tls_allowed_peers;
  std::optional<int64_t> tls_handshake_timeout_ms;
  std::optional<std::string> file_roots;

  /// Declares them on `app` (the groups "Configuration", "TLS" and
  /// "Files").
  void add_to(CLI::App& app);

  /// What --help says about them besides their own lines: CAF's
  /// --caf.NAME=VALUE and TF_CONFIG's "tls".
  static const char* footer();
};

/// The TLS configuration of the process: TF_CONFIG's "tls" object, then
/// the --tls_* flags over it. usage_error naming the flag or field.
tls_config read_tls_config(const common_flags& flags);

class command_line {
public:
  /// `program` names the process in the help and the log; `description`
  /// opens its help.
  command_line(std::string program, std::string description);

  command_line(const command_line&) = delete;
  command_line& operator=(const command_line&) = delete;

  /// The CLI::App to declare the program's flags on. Options refuse to be
  /// given twice.
  CLI::App& app() noexcept {
    return app_;
  }

  /// Adds `text` to the end of the help (after the program's footer, the
  /// common flags' footer).
  void footer(const std::string& text);

  /// Parses argv, then --config-file's [actorflow] section (the command
  /// line wins); CAF's options and sections are kept for apply(). Returns
  /// false if --help was given (the help is on stdout). usage_error naming
  /// the flag, key or file.
  bool parse(int argc, char** argv);

  /// Applies what every program takes: sets up the log (log.hpp) at
  /// --log_level, configures the process-wide actor system with CAF's
  /// options and TLS, sets the file policy (--file_roots; the TLS files
  /// and --config-file denied to every op). usage_error naming the flag,
  /// file or CAF option at fault. Call before anything uses the actor system.
  void apply() const {
    apply(program_);
  }

  /// apply(), the log naming `program`.
  void apply(const std::string& program) const;

  /// The options among `opts` that were given (on the command line or in
  /// the file), as flags for a child process: "--name=value", and
  /// "--switch" for a switch that is on.
  std::vector<std::string> as_args(const std::vector<CLI::Option*>& opts) const;

  /// --log_level, --caf.* and the TLS flags as given, for child processes
  /// (which get the file's [actorflow] flags as flags, and its CAF sections
  /// in a file of their own: caf_ini()).
  std::vector<std::string> common_args() const;

  /// The configuration file's CAF sections, as CAF 0.17 reads them.
  const std::string& caf_ini() const noexcept {
    return caf_ini_;
  }

  const common_flags& common() const noexcept {
    return common_;
  }

private:
  void read_config_file();
  void apply_file_policy() const;

  std::string program_;
  CLI::App app_;
  common_flags common_;
  std::vector<CLI::Option*> common_options_;
  // CAF's options as given ("--caf.scheduler.max-threads=2") and as CAF
  // 0.17 spells them ("--scheduler.max-threads=2").
  std::vector<std::string> caf_given_;
  std::vector<std::string> caf_args_;
  std::string caf_ini_;
};

} // namespace actorflow::support
