// The tensor plan of a Hugging Face -> GGUF conversion: which checkpoint
// tensors make each GGUF tensor, in which layout and type (the family's rules,
// hf_families.h), and the rows each gives when the writer asks for them.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "convert/hf_convert.h"
#include "convert/hf_families.h"
#include "formats/safetensors.h"
#include "tensor/dtype.h"

namespace colibri {

class ThreadPool;

// One Hugging Face tensor feeding a GGUF tensor; FP8 weights carry their
// per-block scales (weight_scale_inv: one F32 per block of rows x cols).
// Integer weights packed by compressed-tensors (pack-quantized: Kimi-K2
// Thinking's INT4 experts) are NAME_packed (I32 words, `bits`-bit codes
// from the lowest bits up, code = value + 2^(bits-1)) with NAME_scale (one
// per group of `group` columns) and NAME_shape (rows, cols).
struct Source {
  SafetensorsSet::Entry w;
  const SafetensorsSet::Entry* scale = nullptr;
  int64_t block_rows = 0, block_cols = 0;
  // Packed integers: the weight's own shape (w is NAME_packed), the code
  // width and the columns a scale covers; bits 0 otherwise.
  std::vector<int64_t> packed_shape = {};
  int bits = 0;
  int64_t group = 0;
};

// One GGUF tensor and where its rows come from.
struct Planned {
  std::string name;
  HfLayout layout = HfLayout::kAsIs;
  DType type = DType::F32;
  std::vector<int64_t> ne;      // GGUF order
  std::vector<Source> sources;  // one, or one per expert
  int64_t rows_per_source = 0;  // kExperts
  int head_dim = 0;             // kRopeRows
  int nope = 0, v = 0;          // kLatentKeys / kLatentValues: each head's key and value rows
  int pick = -1;                // kMxfp4Experts rows, kPickCols columns: even (0) or odd (1)
  int64_t src_rows = 0;         // kMxfp4Experts: rows of each expert in the source
  bool vector = false;          // a 1-D source
};

// Every GGUF tensor of the folder's model: the global rules, then each
// layer's (dense or MoE ones as the layer is). Throws Error naming the
// tensor for one missing, of the wrong shape or dtype, or one no rule maps.
std::vector<Planned> plan_tensors(const SafetensorsSet& set, const HfFamily& family,
                                  const HfShape& shape, std::optional<DType> type,
                                  const nlohmann::json& config, const std::string& where);

// Gives each quantized matrix of the plan (planned in m's base type) the type
// llama-quantize's file type m gives it; MXFP4 experts stay MXFP4.
void apply_quant_mix(QuantMix m, const HfShape& shape, bool mla, std::vector<Planned>& plan);

// Rows [row0, row0 + n) of t in its GGUF type into dst, shared among the
// pool's threads.
void fill_rows(const Planned& t, int64_t row0, int64_t n, uint8_t* dst, ThreadPool& pool);

// Takes t's sources out of the process and the page cache (once t is
// written), so a model larger than memory converts in about one tensor's.
void release_sources(const Planned& t);

// llama.cpp's LLAMA_FTYPE for general.file_type.
uint32_t file_type_of(DType t);

}  // namespace colibri
