#include "convert/hf_convert.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "convert/hf_families.h"
#include "convert/hf_tensors.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "model/arch.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tiktoken.h"

namespace colibri {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// tokenizer.json of the largest vocabularies is ~30 MB.
constexpr uintmax_t kMaxJsonBytes = uintmax_t{256} << 20;

// Reads folder/name; nullopt when absent and !required.
std::optional<std::string> read_text(const fs::path& folder, const char* name, bool required) {
  const fs::path p = folder / name;
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    CLB_CHECK(!required, "%s: the folder has no %s", folder.c_str(), name);
    return std::nullopt;
  }
  const uintmax_t size = fs::file_size(p, ec);
  CLB_CHECK(!ec, "%s: cannot read its size: %s", p.c_str(), ec.message().c_str());
  CLB_CHECK(size <= kMaxJsonBytes,
            "%s: %ju bytes, more than the %ju a JSON file of a model may have", p.c_str(), size,
            kMaxJsonBytes);
  std::ifstream in(p, std::ios::binary);
  CLB_CHECK(in.good(), "%s: cannot open it", p.c_str());
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  CLB_CHECK(in.gcount() == static_cast<std::streamsize>(size), "%s: short read", p.c_str());
  return text;
}

// Reads and parses folder/name; nullopt when absent and !required.
std::optional<json> read_json(const fs::path& folder, const char* name, bool required) {
  const std::optional<std::string> text = read_text(folder, name, required);
  if (!text) return std::nullopt;
  const fs::path p = folder / name;
  try {
    json j = json::parse(*text);
    CLB_CHECK(j.is_object(), "%s: expected a JSON object", p.c_str());
    return j;
  } catch (const json::exception& e) {
    fail("%s: not valid JSON: %s", p.c_str(), e.what());
  }
}

// The folder's tiktoken BPE file: tiktoken.model, else its one *.tiktoken.
std::optional<std::string> tiktoken_file(const fs::path& folder) {
  std::error_code ec;
  if (fs::exists(folder / "tiktoken.model", ec)) return "tiktoken.model";
  std::optional<std::string> found;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    if (e.path().extension() != ".tiktoken") continue;
    CLB_CHECK(!found, "%s: two tiktoken files, %s and %s", folder.c_str(), found->c_str(),
              e.path().filename().c_str());
    found = e.path().filename().string();
  }
  return found;
}

// The tokenizer module tokenizer_config.json's auto_map names
// ("tokenization_kimi.TikTokenTokenizer" -> tokenization_kimi.py), else the
// folder's one tokenization_*.py.
std::string tokenizer_module(const fs::path& folder, const json* tok_cfg) {
  const json* map = tok_cfg && tok_cfg->contains("auto_map") ? &(*tok_cfg)["auto_map"] : nullptr;
  const json* entry = map && map->is_object() && map->contains("AutoTokenizer")
                          ? &(*map)["AutoTokenizer"]
                          : nullptr;
  if (entry && entry->is_array() && !entry->empty()) entry = &(*entry)[0];
  if (entry && entry->is_string()) {
    const std::string cls = entry->get<std::string>();
    const size_t dot = cls.rfind('.');
    const std::string module = dot == std::string::npos ? cls : cls.substr(0, dot);
    CLB_CHECK(!module.empty() && module.find_first_of("/\\.") == std::string::npos,
              "%s: tokenizer_config.json: auto_map.AutoTokenizer \"%s\" does not name a module "
              "of the folder",
              folder.c_str(), cls.c_str());
    return module + ".py";
  }
  std::optional<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("tokenization_") || e.path().extension() != ".py") continue;
    CLB_CHECK(!found,
              "%s: two tokenizer modules, %s and %s, and no auto_map.AutoTokenizer in "
              "tokenizer_config.json to choose",
              folder.c_str(), found->c_str(), name.c_str());
    found = name;
  }
  CLB_CHECK(found.has_value(),
            "%s: a tiktoken tokenizer, but no tokenization_*.py module gives its split regex",
            folder.c_str());
  return *found;
}

// A folder without tokenizer.json: its tiktoken files as the tokenizer.json
// they convert to; files.tokenizer_name names them in errors.
json tiktoken_folder_tokenizer(const fs::path& folder, const json* tok_cfg,
                               HfTokenizerFiles& files) {
  const std::optional<std::string> ranks_name = tiktoken_file(folder);
  CLB_CHECK(ranks_name.has_value(),
            "%s: the folder has no tokenizer.json (nor a tiktoken.model or *.tiktoken file)",
            folder.c_str());
  const std::string module_name = tokenizer_module(folder, tok_cfg);
  const std::string ranks = *read_text(folder, ranks_name->c_str(), true);
  const std::string module = *read_text(folder, module_name.c_str(), true);
  TiktokenFiles tk;
  tk.ranks = ranks;
  tk.ranks_name = *ranks_name;
  tk.module = module;
  tk.module_name = module_name;
  tk.tokenizer_config = tok_cfg;
  files.tokenizer_name = *ranks_name + " with " + module_name;
  return tiktoken_tokenizer_json(tk, folder.string());
}

}  // namespace

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec);
}

namespace {

HfConvertReport convert_folder(const HfConvertOptions& o) {
  const fs::path folder(o.folder);
  std::error_code ec;
  CLB_CHECK(fs::is_directory(folder, ec),
            "%s: not a folder (a Hugging Face model folder has config.json, "
            "model.safetensors and tokenizer.json)",
            o.folder.c_str());
  const json config = *read_json(folder, "config.json", true);
  const std::string cwhere = (folder / "config.json").string();

  // The family.
  CLB_CHECK(config.contains("architectures") && config["architectures"].is_array() &&
                !config["architectures"].empty() && config["architectures"][0].is_string(),
            "%s: architectures: expected a list naming the model class", cwhere.c_str());
  const std::string hf_arch = config["architectures"][0].get<std::string>();
  const HfFamily* fam = find_hf_family(hf_arch);
  CLB_CHECK(fam != nullptr, "%s: architecture %s is not converted (converted: %s)", cwhere.c_str(),
            hf_arch.c_str(), supported_hf_families().c_str());
  CLB_CHECK(find_arch(fam->gguf_arch) != nullptr,
            "family table: %s is not a GGUF family this build runs",
            std::string(fam->gguf_arch).c_str());

  CLB_CHECK(!(o.type && o.mix), "convert: a type and a file type both given");
  if (o.type) {
    const DType t = *o.type;
    CLB_CHECK(
        t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 ||
            t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1,
        "output type %s is not converted to (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1; "
        "llama-quantize's file types q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k, iq4_nl, iq4_xs as a mix)",
        dtype_name(t));
  }

  GgufWriter w;
  w.set_string("general.architecture", std::string(fam->gguf_arch));
  w.set_string("general.type", "model");
  w.set_string("general.name", o.name.empty() ? folder.filename().string() : o.name);
  const HfShape shape = hf_config_to_gguf(config, *fam, w, cwhere);

  // Tensors.
  auto set = SafetensorsSet::open_dir(o.folder);
  std::vector<Planned> plan = plan_tensors(
      *set, *fam, shape, o.mix ? std::optional<DType>(quant_mix_base(*o.mix)) : o.type, config, o.folder);
  if (o.mix) apply_quant_mix(*o.mix, shape, fam->mla, plan);

  // general.file_type: the type most matrix bytes have.
  DType main_type = DType::F32;
  {
    std::map<DType, uint64_t> bytes;
    for (const Planned& t : plan)
      if (t.ne.size() > 1)
        bytes[t.type] +=
            row_bytes(t.type, t.ne[0]) * (t.ne.size() > 2 ? t.ne[1] * t.ne[2] : t.ne[1]);
    uint64_t best = 0;
    for (auto [t, b] : bytes)
      if (b > best) best = b, main_type = t;
  }
  // llama.cpp's MXFP4_MOE when the experts are MXFP4, whatever the rest is;
  // a llama-quantize file type as it names the file.
  const bool mxfp4 = std::any_of(plan.begin(), plan.end(),
                                 [](const Planned& t) { return t.type == DType::MXFP4; });
  w.set_u32("general.file_type", mxfp4    ? file_type_of(DType::MXFP4)
                                 : o.mix ? quant_mix_file_type(*o.mix)
                                         : file_type_of(main_type));
  if (dtype_info(main_type).block_size > 1) w.set_u32("general.quantization_version", 2);

  // The tokenizer and chat template.
  {
    const auto tok_cfg = read_json(folder, "tokenizer_config.json", false);
    const auto gen_cfg = read_json(folder, "generation_config.json", false);
    HfTokenizerFiles files;
    std::optional<json> tok = read_json(folder, "tokenizer.json", false);
    if (!tok) tok = tiktoken_folder_tokenizer(folder, tok_cfg ? &*tok_cfg : nullptr, files);
    files.tokenizer = &*tok;
    files.tokenizer_config = tok_cfg ? &*tok_cfg : nullptr;
    files.config = &config;
    files.generation_config = gen_cfg ? &*gen_cfg : nullptr;
    const auto jinja = read_text(folder, "chat_template.jinja", false);
    files.chat_template = jinja ? &*jinja : nullptr;
    import_hf_tokenizer(files, w, o.folder);
  }

  uint64_t total = 0;
  for (const Planned& t : plan) {
    int64_t n_rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) n_rows *= t.ne[d];
    total += row_bytes(t.type, t.ne[0]) * static_cast<uint64_t>(n_rows);
  }
  auto done = std::make_shared<std::atomic<uint64_t>>(0);
  const int n_threads = o.n_threads > 0
                            ? o.n_threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto pool = std::make_shared<ThreadPool>(n_threads);
  for (const Planned& t : plan) {
    const Planned* tp = &t;
    w.add_tensor_info(t.name, t.type, t.ne,
                      [tp, done, total, pool, &o](int64_t row0, int64_t n_rows, uint8_t* dst) {
                        fill_rows(*tp, row0, n_rows, dst, *pool);
                        int64_t total_rows = 1;
                        for (size_t d = 1; d < tp->ne.size(); ++d) total_rows *= tp->ne[d];
                        if (row0 + n_rows == total_rows) {
                          release_sources(*tp);  // written: its sources leave memory
                        }
                        const uint64_t bytes =
                            row_bytes(tp->type, tp->ne[0]) * static_cast<uint64_t>(n_rows);
                        const uint64_t now = done->fetch_add(bytes) + bytes;
                        if (o.progress) o.progress(now, total);
                      });
  }
  w.write(o.out);

  HfConvertReport rep;
  rep.hf_arch = hf_arch;
  rep.gguf_arch = std::string(fam->gguf_arch);
  rep.n_tensors = plan.size();
  rep.data_bytes = total;
  return rep;
}

}  // namespace

HfConvertReport convert_hf_folder(const HfConvertOptions& o) {
  try {
    return convert_folder(o);
  } catch (const nlohmann::json::exception& e) {
    // A value of a type no check above expected: still the file's fault.
    fail("%s: unexpected JSON: %s", o.folder.c_str(), e.what());
  }
}

}  // namespace colibri
