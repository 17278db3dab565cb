#!/usr/bin/env bash
# Stage NIXL for the offline GPU machine (run here, where PyPI is reachable): the pinned nixl 1.5.1 wheels (the
# meta package and its CUDA 13 build, for the machine's torch 2.11 cu130), hash-checked, packed in one tar and
# split into pieces of PIECE_MIB (default 36) MiB, one folder per piece (.stage/nixl_p00, nixl_p01, ...), so that
# each piece travels with one device call beside the working tree (64 MiB in all; the tree is ~24 MiB).
# On the device each call moves its piece into /root/stage; h200x2-disagg.sh joins, checks and unpacks them
# into /root/site when `import nixl` fails there.
# Usage: bash calibration/campaigns/stage_nixl.sh [STAGE_DIR]   (default .stage; keep .stage/ out of git)
set -euo pipefail
STAGE=${1:-.stage}
PIECE_MIB=${PIECE_MIB:-36}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cat > "$W/req.txt" <<'REQS'
nixl==1.5.1 --hash=sha256:aa90914d7df16fb586e57be633972917c6c2489b004ad241913ecda02207eaab
nixl-cu13==1.5.1 --hash=sha256:ce48b601bad4c4503a5d9d418e6f4b1289a3a68e407af99f0f7e377f8371f49b
REQS
"${PYTHON:-python3}" -m pip download -q --no-deps --require-hashes --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 -d "$W/wheels" -r "$W/req.txt"
tar -cf "$W/nixl_wheels.tar" -C "$W/wheels" nixl-1.5.1-py3-none-any.whl \
  nixl_cu13-1.5.1-cp312-cp312-manylinux_2_28_x86_64.whl
rm -rf "$STAGE"/nixl_p[0-9][0-9]
(cd "$W" && split -b "${PIECE_MIB}M" -d -a 2 nixl_wheels.tar nixl_wheels.tar.part)
(cd "$W" && sha256sum nixl_wheels.tar nixl_wheels.tar.part[0-9][0-9] > NIXL_SHA256SUMS)
for part in "$W"/nixl_wheels.tar.part[0-9][0-9]; do
  n=${part##*.part}
  mkdir -p "$STAGE/nixl_p$n"
  mv "$part" "$STAGE/nixl_p$n/"
  cp "$W/NIXL_SHA256SUMS" "$STAGE/nixl_p$n/"
done
ls -d "$STAGE"/nixl_p[0-9][0-9] | sed 's/^/carry: /'
