// colibri inspect: metadata, tensors, the expert layout and the bytes a token
// reads.
#include <cstdio>

#include "base/error.h"
#include "cli/commands.h"
#include "formats/gguf.h"
#include "model/config.h"
#include "model/weights.h"
#include "moe/placement.h"

namespace colibri::cli {

namespace {

struct InspectArgs {
  std::string model;
  bool all_tensors = false;
};

int inspect(const InspectArgs& a) {
  auto f = GgufFile::open(a.model);
  std::printf("file: %s (%s), GGUF v%u, %zu metadata keys, %zu tensors, data at byte %zu\n",
              a.model.c_str(), format_size(f->bytes_on_disk()).c_str(), f->version(),
              f->metadata().size(), f->tensors().size(), f->data_offset());
  if (f->parts().size() > 1) {
    std::printf("split in %zu files:\n", f->parts().size());
    for (const MappedFile::Part& p : f->parts())
      std::printf("  %s (%s)\n", p.path.c_str(), format_size(static_cast<double>(p.size)).c_str());
  }
  std::printf("\nmetadata:\n");
  for (const GgufKV& kv : f->metadata())
    std::printf("  %-48s %s\n", kv.key.c_str(), gguf_value_to_string(kv.value).c_str());

  std::printf("\ntensors:\n");
  size_t shown = 0;
  for (const GgufTensor& t : f->tensors()) {
    if (!a.all_tensors && shown >= 40) {
      std::printf("  ... %zu more (--all-tensors)\n", f->tensors().size() - shown);
      break;
    }
    std::string shape;
    for (int d = 0; d < t.n_dims; ++d) shape += strprintf(d ? " x %lld" : "%lld", static_cast<long long>(t.ne[d]));
    std::printf("  %-36s %-6s [%s] %s @ %llu\n", t.name.c_str(), dtype_name(t.type), shape.c_str(),
                format_size(t.nbytes).c_str(), static_cast<unsigned long long>(t.offset));
    ++shown;
  }

  // The model view: only for architectures we run.
  std::string arch(f->get_string("general.architecture").value_or(""));
  if (!find_arch(arch)) {
    std::printf("\narchitecture '%s' is not one colibri runs (%s)\n", arch.c_str(),
                supported_arch_names());
    return 0;
  }
  ModelConfig cfg = ModelConfig::from_gguf(*f);
  ModelWeights w = bind_weights(*f, cfg);
  std::printf("\nmodel: %s\n", cfg.describe().c_str());
  std::printf("dense part (attention, norms, embeddings, routers, shared experts): %s\n",
              format_size(static_cast<double>(w.dense_bytes)).c_str());
  std::printf("routed experts: %s\n", format_size(static_cast<double>(w.expert_bytes)).c_str());

  // Bytes one decoded token reads: every dense matrix but the embedding
  // table (one row of it), plus k expert slabs in each MoE layer.
  double per_token = static_cast<double>(w.dense_bytes) -
                     static_cast<double>(w.token_embd.n_rows() * w.token_embd.row_stride()) +
                     static_cast<double>(w.token_embd.row_stride());
  if (w.output.data == w.token_embd.data)
    per_token += static_cast<double>(w.output.n_rows() * w.output.row_stride());
  if (cfg.is_moe()) {
    std::printf("\nexpert layout (one slab = gate + up + down of one expert):\n");
    for (int l = 0; l < cfg.n_layer; ++l) {
      const ExpertTensors& x = w.experts[l];
      if (!x.gate_exps.data) {
        std::printf("  layer %2d: dense\n", l);
        continue;
      }
      std::printf("  layer %2d: %d experts x %s (gate %s, up %s, down %s); %d used per token\n", l,
                  cfg.n_expert, format_size(static_cast<double>(x.slab_bytes())).c_str(),
                  dtype_name(x.gate_exps.type), dtype_name(x.up_exps.type),
                  dtype_name(x.down_exps.type), cfg.n_expert_used);
      per_token += static_cast<double>(x.slab_bytes()) * cfg.n_expert_used;
    }
  }
  std::printf("\nweight bytes read per generated token: %s (%.1f%% of the file)\n",
              format_size(per_token).c_str(),
              100.0 * per_token / static_cast<double>(f->bytes_on_disk()));
  return 0;
}

}  // namespace

Runner add_inspect(CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* c = app.add_subcommand("inspect", "list a GGUF file's metadata, tensors and expert layout");
  c->add_option("model", a->model, "model file (GGUF)")->required();
  c->add_flag("--all-tensors", a->all_tensors, "list every tensor");
  return [a] { return inspect(*a); };
}

COLIBRI_COMMAND(add_inspect);

}  // namespace colibri::cli
