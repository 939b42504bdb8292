#include "cli/assign_command.h"
#include "cli/command.h"
#include "cli/onnx_run.h"
#include "cli/plan_command.h"
#include "cli/tokenize_command.h"
#include "core/error.h"
#include "kernels/blas.h"

#include <fmt/format.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  // Before any thread or BLAS call (kernels/blas.h).
  huddle::kernels::configure_blas_environment();
  CLI::App app{"huddle: one inference request across the trusted devices nearby"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every command");
  huddle::cli::add_run_command(app);
  huddle::cli::add_synth_command(app);
  huddle::cli::add_quantize_command(app);
  huddle::cli::add_worker_command(app);
  huddle::cli::add_tokenize_commands(app);
  huddle::cli::add_plan_command(app);
  huddle::cli::add_profile_command(app);
  huddle::cli::add_info_command(app);
  huddle::cli::add_assign_command(app);
  huddle::cli::add_serve_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message
    return 2;
  } catch (const huddle::UsageError& e) {
    std::fprintf(stderr, "huddle: usage: %s\n", e.what());
    return 2;
  } catch (const huddle::Error& e) {
    std::fprintf(stderr, "huddle: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "huddle: unexpected error: %s\n", e.what());
    return 1;
  }
  return 0;
}
