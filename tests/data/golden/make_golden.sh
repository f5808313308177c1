#!/bin/bash
# Writes the files of this folder from llama.cpp's own tools, as
# ../../../../shared/golden was written (its README, "How the outputs were
# produced"): llama-quantize turns two of shared/golden's float models into the
# types shared/golden lacks, golden_dump (shared/tools/golden_dump, built
# against the same llama.cpp) records llama.cpp's outputs on them, and
# llama.cpp's gguf-py hashes llama.cpp's own dequantization of every tensor.
#
# Usage: make_golden.sh LLAMA_CPP_SOURCE GOLDEN_DUMP [SHARED]
#   LLAMA_CPP_SOURCE: a llama.cpp tree built with CMake (build/bin/llama-quantize)
#   GOLDEN_DUMP: shared/tools/golden_dump built against that tree's libllama
set -euo pipefail
llama=$1
dump=$2
shared=${3:-$(dirname "$0")/../../../../shared}
out=$(cd "$(dirname "$0")" && pwd)
quantize=$llama/build/bin/llama-quantize
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The IQ1, IQ2 and IQ3 types need an importance matrix: llama-imatrix's, from
# the start of shared/data/text/war-and-peace.txt, one thread.
# (Run in $tmp with relative names: llama-quantize writes the matrix's and
# the text's paths into the file.)
shared=$(cd "$shared" && pwd)
head -c 60000 "$shared/data/text/war-and-peace.txt" > "$tmp/text.txt"
(cd "$tmp" && "$llama/build/bin/llama-imatrix" -m "$shared/golden/qwen3moe-h256-f16.gguf" -f text.txt \
  -o imatrix.gguf -c 128 --chunks 40 -t 1 >/dev/null 2>&1)

# name  source model in shared/golden  llama-quantize file type  [its options]
while read -r name src ftype options; do
  options=${options//IMATRIX/imatrix.gguf}
  # shellcheck disable=SC2086 # the options are words
  (cd "$tmp" && "$quantize" $options "$shared/golden/$src.gguf" "$out/$name.gguf" "$ftype" >/dev/null 2>&1)
  "$dump" "$out/$name.gguf" "$out/$name.json" >/dev/null
  "$quantize" --allow-requantize "$out/$name.gguf" "$tmp/$name-f32.gguf" F32 >/dev/null 2>&1
  "$dump" "$tmp/$name-f32.gguf" "$out/$name.dequant-f32.json" --model-name "$name.gguf" \
    --weights "dequantized to F32 (llama-quantize --allow-requantize $name.gguf OUT F32)" >/dev/null
  # FNV-1a (64-bit) of each tensor's F32 values as llama.cpp dequantized them.
  PYTHONPATH=$llama/gguf-py /usr/bin/python3 - "$tmp/$name-f32.gguf" "$out/$name.gguf" \
    "$out/$name.dequant-f32.fnv.json" <<'PY'
import json, sys
import gguf
f32, quant, dst = sys.argv[1:]
types = {t.name: t.tensor_type.name.lower() for t in gguf.GGUFReader(quant).tensors}
sums = {}
for t in gguf.GGUFReader(f32).tensors:
    h = 0xcbf29ce484222325
    for b in t.data.astype("<f4").tobytes():
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    sums[t.name] = {"type": types[t.name], "fnv1a64": "%016x" % h}
json.dump({"source": "llama.cpp's dequantization (llama-quantize --allow-requantize F32)",
           "tensors": sums}, open(dst, "w"), indent=1, sort_keys=True)
PY
done <<'LIST'
qwen3moe-h256-iq4_xs qwen3moe-h256-f16 IQ4_XS
deepseek-v3-iq4_nl deepseek-v3-f32 IQ4_NL
qwen3moe-h256-iq1_s qwen3moe-h256-f16 IQ1_S --imatrix IMATRIX --tensor-type ffn_down_exps=iq1_m
qwen3moe-h256-iq3_xxs qwen3moe-h256-f16 IQ3_XXS --imatrix IMATRIX --tensor-type ffn_down_exps=iq2_xs
qwen3moe-h256-mixed qwen3moe-h256-f16 Q4_K_M --tensor-type blk\.0\.ffn_up_exps=q8_0 --tensor-type blk\.1\.ffn_up_exps=q6_k --tensor-type blk\.1\.ffn_gate_exps=iq4_xs
LIST

# The type llama-quantize gives each tensor in each IQ1-IQ3 file type (with
# the importance matrix, no override), for colibri synth's file types.
for ftype in IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ3_XXS; do
  (cd "$tmp" && "$quantize" --imatrix imatrix.gguf "$shared/golden/qwen3moe-h256-f16.gguf" "types-$ftype.gguf" \
    "$ftype" >/dev/null 2>&1)
done
PYTHONPATH=$llama/gguf-py /usr/bin/python3 - "$tmp" "$out/qwen3moe-h256-iq-types.json" <<'PY'
import json, sys
import gguf
tmp, dst = sys.argv[1:]
files = {}
for ftype in ["IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS"]:
    r = gguf.GGUFReader(f"{tmp}/types-{ftype}.gguf")
    files[ftype.lower()] = {
        "file_type": int(r.fields["general.file_type"].parts[-1][0]),
        "tensors": {t.name: t.tensor_type.name.lower() for t in r.tensors},
    }
json.dump({"source": "llama-quantize --imatrix (make_golden.sh) of shared/golden/qwen3moe-h256-f16.gguf",
           "files": files}, open(dst, "w"), indent=1, sort_keys=True)
PY
