#!/usr/bin/env bash
# Stage NIXL for the offline GPU machine (run here, where PyPI is reachable): the pinned nixl 1.5.1 wheels
# (the meta package and its CUDA 13 build, for the machine's torch 2.11 cu130), hash-checked, into one folder
# that travels with one device call (`carry: [".stage/opt_nixl"]`, 56 MiB).  The device side is
# h200x2-disagg.sh, which unpacks them into /root/site when `import nixl` fails there.
# Usage: bash calibration/campaigns/stage_nixl.sh [DIR]   (default .stage/opt_nixl; keep .stage/ out of git)
set -euo pipefail
DIR=${1:-.stage/opt_nixl}
mkdir -p "$DIR"
REQ=$(mktemp)
trap 'rm -f "$REQ"' EXIT
cat > "$REQ" <<'REQS'
nixl==1.5.1 --hash=sha256:aa90914d7df16fb586e57be633972917c6c2489b004ad241913ecda02207eaab
nixl-cu13==1.5.1 --hash=sha256:ce48b601bad4c4503a5d9d418e6f4b1289a3a68e407af99f0f7e377f8371f49b
REQS
"${PYTHON:-python3}" -m pip download --no-deps --require-hashes --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_28_x86_64 -d "$DIR" -r "$REQ"
(cd "$DIR" && sha256sum nixl-1.5.1-py3-none-any.whl nixl_cu13-1.5.1-cp312-cp312-manylinux_2_28_x86_64.whl > SHA256SUMS)
du -sh "$DIR"
