"""Wait until a GPU's memory is released after a job (kill what is left of our own processes on it).

    python3 calibration/campaigns/gpu_free.py GPU_INDEX [TIMEOUT_S]

Between two engines on one GPU: an engine child that outlived its parent would make the next engine's
start-up check ("free memory < gpu_memory_utilization × total") fail."""
import subprocess
import sys
import time


def used_mib(gpu: str) -> float:
    """Most memory used on any of the GPUs ``gpu`` names ("0" or "0,1")."""
    out = subprocess.run(["nvidia-smi", "-i", gpu, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=20).stdout.strip()
    return max(float(x) for x in out.splitlines())


def main() -> int:
    gpu = sys.argv[1]
    timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    t0 = time.time()
    killed = False
    while time.time() - t0 < timeout:
        if used_mib(gpu) < 2048:
            print(f"gpu {gpu} free after {time.time() - t0:.0f} s", flush=True)
            return 0
        if time.time() - t0 > 15 and not killed:
            pids = subprocess.run(["nvidia-smi", "-i", gpu, "--query-compute-apps=pid", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=20).stdout.split()
            for pid in pids:
                subprocess.run(["kill", "-9", pid.strip()])
            print(f"gpu {gpu}: killed leftover pids {pids}", flush=True)
            killed = True
        time.sleep(1)
    print(f"gpu {gpu} still busy after {timeout:.0f} s", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
