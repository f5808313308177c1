// A Hugging Face model folder -> one GGUF file colibri (and llama.cpp) loads.
//
// The folder is what `huggingface-cli download` leaves: config.json,
// model.safetensors or model.safetensors.index.json and its shards,
// tokenizer.json (or a tiktoken BPE file with the Python module that gives its
// split regex, as Kimi-K2 ships its tokenizer: tokenizer/tiktoken.h), and
// optionally tokenizer_config.json (special tokens, the chat template) and
// generation_config.json. Every input is untrusted: a
// missing file, key or tensor, a shape that disagrees with the config, a
// tensor no rule maps, a dtype that cannot be converted end in an Error that
// names the file and the field, before anything is written.
//
// Tensors are written as llama.cpp's convert_hf_to_gguf.py names and lays
// them out (model/arch.h's families; experts stacked per layer, llama-family
// q/k rows permuted), streamed a chunk of rows at a time so that a model
// larger than memory converts, and in the output type asked for: as stored
// (F32, F16, BF16), or any type with a reference quantizer (Q8_0, Q4_0, ...),
// or as llama-quantize would write a file type (Q4_K_M, IQ4_XS, ...).
// Vectors (norms, biases) and routers stay F32, as llama.cpp keeps them.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "model/quant_mix.h"
#include "tensor/dtype.h"

namespace colibri {

class GgufWriter;
struct HfFamily;

struct HfConvertOptions {
  std::string folder;
  std::string out;
  // nullopt: each matrix in its stored type. Otherwise F32, F16, BF16 or a
  // type quantize_weights has (matrices whose rows do not fill whole blocks
  // become F16).
  std::optional<DType> type;
  // Instead of type: llama-quantize's file type, each matrix in the type it
  // would give it (model/quant_mix.h). MXFP4 experts stay MXFP4.
  std::optional<QuantMix> mix;
  std::string name;   // general.name; "" takes the folder's name
  int n_threads = 0;  // threads converting rows; 0: all cores
  // Bytes of tensor data written so far, of total.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct HfConvertReport {
  std::string hf_arch, gguf_arch;
  size_t n_tensors = 0;
  uint64_t data_bytes = 0;
};

// Converts o.folder into o.out (written atomically). Throws Error.
HfConvertReport convert_hf_folder(const HfConvertOptions& o);

// True when path is a folder with a config.json (the CLI's hint to convert).
bool is_hf_folder(const std::string& path);

// The hyperparameters of config.json as the family's GGUF keys. Throws Error
// naming `where` and the key for a value missing, out of range or one the
// GGUF family cannot represent.
struct HfShape {
  int n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_expert = 0;
  int n_dense_lead = 0;  // leading dense layers
  int n_nextn = 0;       // multi-token-prediction layers after n_layer
  bool keep_nextn = false;  // ... converted as blocks after the model's (HfFamily::keep_nextn)
  int mla_nope = 0, mla_v = 0, kv_lora = 0;  // multi-head latent attention
};
HfShape hf_config_to_gguf(const nlohmann::json& config, const HfFamily& family, GgufWriter& w,
                          const std::string& where);

}  // namespace colibri
