// hcctl: the command line of hetero-commd's gRPC services (Health, Control). Talks to the admin
// Unix socket by default, or to a TCP address; exit codes in commands.h.
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>

#include "common/man_page.h"
#include "common/paths.h"
#include "tools/hcctl/commands.h"

namespace {

// The daemon's own default: beside the client socket (HC_SOCKET moves both), unless the admin
// socket was set for the daemon through its environment variable.
std::string defaultAdminSocket() {
  if (const char* s = std::getenv("HC_CONTROL_ADMIN_SOCKET"); s != nullptr && *s != '\0') return s;
  return hc::adminSocketPathFor(hc::defaultSocketPath());
}

// hcctl(1): the sections --help has no room for. Exit codes as in commands.h.
hc::man::PageText manPage() {
  using hc::man::Section;
  hc::man::PageText text;
  text.name = "hcctl";
  text.section = "1";
  text.manual = "User Commands";
  text.summary = "ask hetero-commd about its health, node, devices, clients and communicators";
  text.description =
      "hcctl calls the daemon's gRPC services, grpc.health.v1.Health and "
      "hetero_comm.v1.Control, over its admin Unix socket (control.admin_socket of "
      "hetero-commd.toml(5)), or over TCP with --address (control.listen, or "
      "control.health_listen for health alone), with TLS when --tls-ca is given.\n\n"
      "On the admin socket the daemon knows the caller by its uid: clients, comms, trace, record, "
      "stats and top show a caller only its own uid's clients and their communicators; root and "
      "members of group hetero-comm-admin see every job. Over TCP only a client certificate "
      "that mutual TLS verified sees the jobs.";
  text.sections = {Section{"ENVIRONMENT",
                           "",
                           {{"HC_CONTROL_ADMIN_SOCKET", "the default of --socket"},
                            {"HC_SOCKET",
                             "otherwise, the daemon's client socket: --socket defaults to "
                             "the admin socket beside it (<name>-admin.sock)"},
                            {"XDG_RUNTIME_DIR",
                             "otherwise, for a user other than root, the folder of that "
                             "client socket ($XDG_RUNTIME_DIR/hetero-comm)"}}},
                   Section{"EXIT STATUS",
                           "As grpc_health_probe's, for every command:",
                           {{"0", "success (health: SERVING)"},
                            {"1", "bad arguments"},
                            {"2", "cannot connect (or the TLS handshake failed)"},
                            {"3", "the RPC failed (an unknown health service is NOT_FOUND)"},
                            {"4", "the service is not SERVING"},
                            {"128+N", "top ended by signal N (Ctrl-C in its live view exits 0)"}}}};
  text.seeAlso = {"hetero-commd(8)", "hetero-commd.toml(5)", "hc-perf(1)"};
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hc::hcctl;
  CLI::App app{
      "hcctl: ask hetero-commd about its health, node, devices, clients and communicators"};
  app.require_subcommand(1);
  Target target;
  target.socketPath = defaultAdminSocket();
  int64_t connectMs = 1000;
  int64_t rpcMs = 1000;
  auto* socket = app.add_option("--socket", target.socketPath, "the daemon's admin Unix socket")
                     ->capture_default_str();
  auto* address =
      app.add_option("--address", target.address, "host:port of a control or health listener");
  socket->excludes(address);
  auto* tlsCa = app.add_option("--tls-ca", target.tlsCaFile,
                               "PEM CA of the server's certificate; turns TLS on (with --address)")
                    ->check(CLI::ExistingFile)
                    ->needs(address);
  auto* tlsCert =
      app.add_option("--tls-cert", target.tlsCertFile, "PEM client certificate, for mutual TLS")
          ->check(CLI::ExistingFile)
          ->needs(tlsCa);
  auto* tlsKey = app.add_option("--tls-key", target.tlsKeyFile, "PEM key of --tls-cert")
                     ->check(CLI::ExistingFile)
                     ->needs(tlsCa);
  tlsCert->needs(tlsKey);
  tlsKey->needs(tlsCert);
  app.add_option("--tls-server-name", target.tlsServerName,
                 "the name the server's certificate must carry, when it is not the --address host")
      ->needs(tlsCa);
  app.add_option("--connect-timeout-ms", connectMs, "how long to wait for the connection")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--rpc-timeout-ms", rpcMs, "deadline of the call")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  std::string service;
  bool json = false;
  bool printConfig = false;
  auto* health = app.add_subcommand(
      "health",
      "grpc.health.v1 Check; exits 0 SERVING, 2 connect failed, 3 RPC failed, 4 not SERVING");
  health->add_option("--service", service,
                     "\"\" (the daemon), hetero_comm.v1.Collectives or hetero_comm.v1.Peers");
  health->add_flag("--json", json, "print {\"service\", \"status\"}");
  auto* node = app.add_subcommand("node", "version, build, uptime, devices, NICs, transports");
  node->add_flag("--json", json, "print JSON");
  node->add_flag("--config", printConfig, "print the daemon's effective configuration (TOML)");
  auto* devices = app.add_subcommand("devices", "the GPU inventory");
  devices->add_flag("--json", json, "print {\"gpus\": [...]}");
  bool measure = false;
  devices->add_flag("--measure", measure,
                    "time every GPU's copies and reduction kernel again now (admins; slows "
                    "running jobs for a moment) and print the new weights; waits up to 60 s, or "
                    "--rpc-timeout-ms if longer");
  auto* clients = app.add_subcommand("clients", "the connected training processes");
  clients->add_flag("--json", json, "print JSON");
  auto* comms = app.add_subcommand(
      "comms", "the communicators: key, ranks, state, ops completed, each local rank's last op");
  comms->add_flag("--json", json, "print JSON");
  std::string comm;
  auto* trace = app.add_subcommand(
      "trace", "which ranks have not posted the collective the others wait on, asked of every "
               "daemon of the communicator");
  trace->add_option("COMM", comm, "communicator id, key, or a unique key prefix (4+ digits)")
      ->required();
  trace->add_flag("--json", json, "print JSON");
  uint32_t last = 0;
  auto* record = app.add_subcommand(
      "record", "this daemon's flight record of a communicator, as JSON with PyTorch's field names");
  record->add_option("COMM", comm, "communicator id, key, or a unique key prefix (4+ digits)")
      ->required();
  record->add_option("--last", last, "only the last N operations (0 = all kept)");
  auto* stats = app.add_subcommand("stats", "uptime, clients, communicators, ops, dumps");
  stats->add_flag("--json", json, "print JSON");

  TopOptions topOptions;
  auto* top = app.add_subcommand(
      "top",
      "a live view of the communicators: ops/s, bytes/s, last op, waited-for ranks, "
      "failures; q or Ctrl-C quits");
  top->add_flag("--once", topOptions.once, "print one plain frame and exit (for scripts)");
  top->add_option("--interval", topOptions.intervalSeconds,
                  "seconds between frames; rates are over this interval, so even the first "
                  "frame (and --once) comes one interval after start")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  top->add_option("--iterations", topOptions.iterations,
                  "frames to print, then exit (0 = until q or Ctrl-C); without a terminal, "
                  "frames follow each other as plain text")
      ->capture_default_str();

  hc::man::addPrintManFlag(app, manPage());

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a success; anything else is grpc_health_probe's "bad arguments".
    return app.exit(e) == 0 ? kExitOk : kExitBadArguments;
  }
  target.connectTimeout = std::chrono::milliseconds(connectMs);
  target.rpcTimeout = std::chrono::milliseconds(rpcMs);
  if (health->parsed()) return runHealth(target, service, json);
  if (node->parsed()) return runNode(target, json, printConfig);
  if (devices->parsed()) return runDevices(target, json, measure);
  if (clients->parsed()) return runClients(target, json);
  if (comms->parsed()) return runComms(target, json);
  if (trace->parsed()) return runTrace(target, comm, json);
  if (record->parsed()) return runRecord(target, comm, last);
  if (stats->parsed()) return runStats(target, json);
  if (top->parsed()) return runTop(target, topOptions);
  return kExitBadArguments;
}
