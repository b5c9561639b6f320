// hetero-commd: read the configuration, build the server, run it. Nothing else.
#include <cstdio>

#include <spdlog/spdlog.h>

#include "daemon/config/daemon_config.h"
#include "daemon/config/logging.h"
#include "daemon/server/server.h"

int main(int argc, char** argv) {
  auto loaded = hc::config::loadConfig(argc, argv, hc::config::processEnvironment());
  if (!loaded.isOk()) {
    std::fprintf(stderr, "hetero-commd: %s\n", loaded.status().message().c_str());
    return 2;
  }
  const auto& out = loaded.value();
  if (out.help) {
    std::fputs(out.helpText.c_str(), stdout);
    return 0;
  }
  if (out.manSection != 0) {
    std::fputs(out.manText.c_str(), stdout);
    return 0;
  }
  if (out.version) {
    std::puts("hetero-commd " HC_VERSION);
    return 0;
  }
  if (out.printConfig) {
    std::fputs(hc::config::toToml(out.config).c_str(), stdout);
    return 0;
  }
  if (out.checkConfig) {
    std::printf("configuration OK\n");
    return 0;
  }
  hc::config::setupLogging(out.config.logLevel);
  auto server = hc::server::Server::create(out.config);
  if (!server.isOk()) {
    spdlog::critical("cannot start: {}", server.status().toString());
    return 1;
  }
  return server.value()->run();
}
