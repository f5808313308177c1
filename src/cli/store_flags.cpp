#include "cli/store_flags.h"

#include "base/error.h"

namespace colibri::cli {

void add_store_flags(CLI::App* app, ExpertStoreOptions* o) {
  app->add_option_function<std::string>(
         "--mem",
         [o](const std::string& s) {
           try {
             o->mem_budget = parse_size(s);
           } catch (const Error& e) {
             throw CLI::ValidationError("--mem", e.what());
           }
         },
         "memory budget (4G, 512M, 2.5GiB; units of 1024). Default: the cgroup limit or "
         "available memory, less the fixed overhead")
      ->type_name("SIZE");
  app->add_option("--cache-policy", o->policy, "expert cache policy")
      ->check(CLI::IsMember({"lru", "lfu-decay"}))
      ->capture_default_str();
  app->add_flag("--prefetch,!--no-prefetch", o->prefetch,
                "load the experts the next layer's router predicts while this layer computes")
      ->capture_default_str();
  app->add_option("--prefetch-top", o->prefetch_top,
                  "of each token's guessed experts, load only its N likeliest (0: all it uses)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_flag("--o-direct,!--no-o-direct", o->o_direct,
                "read weights with O_DIRECT (else buffered reads dropped from the page cache)")
      ->capture_default_str();
  app->add_option("--io", o->io, "I/O engine")
      ->check(CLI::IsMember({"uring", "pread"}))
      ->capture_default_str();
  app->add_option("--io-depth", o->io_depth, "reads in flight (pread: threads, at most 16)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app->add_flag("--warm,!--no-warm", o->warm,
                "when every expert fits the budget, read them all in the background at start")
      ->capture_default_str();
  app->add_option("--history-dir", o->history_dir,
                  "where routing counts are kept (default $XDG_CACHE_HOME/colibri or ~/.cache/colibri)");
  app->add_flag("--no-history", o->no_history, "neither read nor write routing counts");
  app->add_option("--slots-per-layer", o->slots_per_layer,
                  "a fixed number of expert cache slots per MoE layer instead of the budget's")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace colibri::cli
