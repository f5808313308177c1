// The streaming store on kernels with large pages: ARM64 kernels run 4, 16 or
// 64 KiB pages, and O_DIRECT offsets, lengths and slots follow the page size
// (base/sys.h page_size()). A 64 KiB alignment is simulated here on whatever
// kernel runs the test; every expert read through it must bring exactly the
// bytes the mapping holds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "base/error.h"
#include "base/sys.h"
#include "moe/expert_store.h"
#include "moe/streaming_store.h"
#include "run_util.h"
#include "synth_model.h"
#include "tensor/ops.h"

namespace colibri {
namespace {

namespace fs = std::filesystem;

TEST(PageSize, IsThePlatformsAndAPowerOfTwo) {
  const size_t p = page_size();
  EXPECT_TRUE(p == 4096 || p == 16384 || p == 65536) << p;
  EXPECT_EQ(p & (p - 1), 0u);
}

TEST(PageSize, StreamingStoreWith64KiBAlignmentReadsExactBytes) {
  // Beside the build: a temp directory may be tmpfs, which refuses O_DIRECT.
  const std::string path =
      std::string(COLIBRI_BINARY_DIR) + "/colibri_moe_64k_" + std::to_string(getpid()) + ".gguf";
  test::write_synth_qwen3moe(path, {}, 11);
  // Raw bytes compare only where no kernel packs expert weights on load.
  const Isa saved = active_isa();
  set_kernel_isa(Isa::kScalar);
  {
    test::LoadedModel m = test::load_model(path);
    MappedExpertStore mapped(m.w.experts);
    for (bool direct : {true, false}) {
      SCOPED_TRACE(direct ? "O_DIRECT" : "buffered");
      StreamingOptions so;
      so.n_slots = 3;
      so.io = "pread";
      so.o_direct = direct;
      so.io_align = 65536;
      StreamingExpertStore store(path, m.file->file_size(), m.w.experts, m.cfg.n_expert, so);
      EXPECT_EQ(store.slot_size() % 65536, 0u);
      for (size_t l = 0; l < m.w.experts.size(); ++l) {
        if (!m.w.experts[l].gate_exps.data) continue;
        for (int e = 0; e < m.cfg.n_expert; e += 3) {
          const ExpertWeights got = store.acquire(static_cast<int>(l), e);
          const ExpertWeights want = mapped.acquire(static_cast<int>(l), e);
          for (auto [g, w] :
               {std::pair{&got.gate, &want.gate}, {&got.up, &want.up}, {&got.down, &want.down}}) {
            ASSERT_EQ(g->slab_bytes(), w->slab_bytes());
            ASSERT_EQ(std::memcmp(g->data, w->data, w->slab_bytes()), 0)
                << "layer " << l << " expert " << e;
          }
          store.release(static_cast<int>(l), e);
          mapped.release(static_cast<int>(l), e);
        }
      }
    }
    // Smaller than a page, or not a power of two: refused with the reason.
    StreamingOptions bad;
    bad.n_slots = 1;
    bad.io_align = page_size() + 512;
    try {
      StreamingExpertStore s(path, m.file->file_size(), m.w.experts, m.cfg.n_expert, bad);
      ADD_FAILURE() << "an alignment that is not a page multiple was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("page size"), std::string::npos) << e.what();
    }
  }
  set_kernel_isa(saved);
  fs::remove(path);
}

}  // namespace
}  // namespace colibri
