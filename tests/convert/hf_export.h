// The other direction, for the tests only: a GGUF model of a family
// `colibri convert` handles, written as the Hugging Face folder it would have
// come from. Names and layouts are written here from the Hugging Face
// modeling files (transformers' modeling_qwen3_moe.py, modeling_qwen2_moe.py,
// modeling_olmoe.py, modeling_mixtral.py), apart from src/convert's table,
// so that a convert that names or lays out a tensor wrongly fails.
#pragma once

#include <filesystem>

namespace colibri {

class GgufFile;

namespace test {

struct ExportOptions {
  int n_shards = 1;           // 1: model.safetensors; more: an index and its shards
  bool bf16 = false;          // matrices as BF16 (F32 weights rounded to nearest even)
  bool drop_lm_head = false;  // a checkpoint with tied embeddings
};

// Writes dir/config.json, the safetensors, tokenizer.json and
// tokenizer_config.json. The GGUF's weights must be F32.
void export_hf_folder(const GgufFile& g, const std::filesystem::path& dir,
                      const ExportOptions& o = {});

}  // namespace test
}  // namespace colibri
