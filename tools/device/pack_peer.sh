#!/usr/bin/env bash
# Run here, not on the device: packs stable-diffusion.cpp's sources, with the ggml commit its submodule
# names, from the library's mirrors (`fetch github:leejet/stable-diffusion.cpp` and
# `fetch github:ggml-org/ggml` bring them) into .peers/stable-diffusion.cpp.tar.gz, which is ignored and
# travels to the device with `carry: [".peers"]`, where tools/device/first_image.sh builds it. Nothing of
# the peer is committed: it is built beside ours only to be timed beside ours. Only what its CLI's build
# reads is packed (no images, no other ggml backends), to stay under the device tool's carry limit.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
sd=${SDCPP_MIRROR:-/work/.mirror/leejet+stable-diffusion.cpp/repo}
ggml=${GGML_MIRROR:-/work/.mirror/ggml-org+ggml/repo}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sd_commit=$(git -C "$sd" rev-parse HEAD)
ggml_commit=$(git -C "$sd" ls-tree HEAD ggml | awk '{print $3}')
# The mirror holds no copy of a few large files: the tokenizer tables of model families other than SD's
# (Gemma, GPT-OSS, Mistral, Qwen, T5). They are packed as empty tables, which only those families read;
# SD1.x/2.x/SDXL use CLIP's table, which is packed whole.
present=()
missing=()
while read -r _ type blob path; do
  [ "$type" = blob ] || continue
  if git -C "$sd" cat-file -e "$blob" 2>/dev/null; then present+=("$path"); else missing+=("$path"); fi
done < <(git -C "$sd" ls-tree -r HEAD CMakeLists.txt cmake include src examples/CMakeLists.txt examples/cli \
           examples/common examples/server thirdparty/CMakeLists.txt thirdparty/darts.h thirdparty/httplib.h \
           thirdparty/json.hpp thirdparty/miniz.h thirdparty/stb_image.h thirdparty/stb_image_resize.h \
           thirdparty/stb_image_write.h thirdparty/zip.c thirdparty/zip.h)
# (git archive also reports a missing asset elsewhere in the tree, assets/ltx2/flf2v.webm; the files
# asked for are all written.)
git -C "$sd" archive --prefix=stable-diffusion.cpp/ HEAD "${present[@]}" | tar x -C "$work"
for path in "${missing[@]}"; do
  case "$path" in src/tokenizers/vocab/*.hpp) ;; *) echo "the mirror lacks $path, which the build needs" >&2; exit 1 ;; esac
  # The table's name as vocab.cpp reads it from that header.
  family=$(basename "$path" .hpp)
  family=${family%_merges}
  family=${family%_vocab}
  names=$(git -C "$sd" show HEAD:src/tokenizers/vocab/vocab.cpp | grep -o '[a-z0-9_]*_\(c_str\|json_str\)' | sort -u)
  : > "$work/stable-diffusion.cpp/$path"
  for name in $names; do
    grep -q "$name" "$work/stable-diffusion.cpp/src/tokenizers/vocab/"*.hpp 2>/dev/null && continue
    case "$name" in "$family"*) printf 'static const unsigned char %s[] = {0};\n' "$name" >> "$work/stable-diffusion.cpp/$path" ;; esac
  done
done
keep=(CMakeLists.txt cmake include src/CMakeLists.txt src/ggml-cpu src/ggml-cuda)
for f in $(git -C "$ggml" ls-tree --name-only "$ggml_commit" src/); do
  case "$f" in src/ggml-*/) ;; src/ggml-*) [ -n "$(git -C "$ggml" ls-tree "$ggml_commit" "$f" | grep ' tree ')" ] || keep+=("$f") ;; *) keep+=("$f") ;; esac
done
git -C "$ggml" archive --prefix=stable-diffusion.cpp/ggml/ "$ggml_commit" "${keep[@]}" | tar x -C "$work"
{
  echo "stable-diffusion.cpp $sd_commit with ggml $ggml_commit"
  [ ${#missing[@]} -eq 0 ] || echo "packed as empty tables (absent from the mirror): ${missing[*]}"
} > "$work/stable-diffusion.cpp/PEER_VERSION"
mkdir -p .peers
tar czf .peers/stable-diffusion.cpp.tar.gz -C "$work" stable-diffusion.cpp
ls -l .peers/stable-diffusion.cpp.tar.gz
cat "$work/stable-diffusion.cpp/PEER_VERSION"
