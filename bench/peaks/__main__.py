"""Fiber-peaks benchmarks, one per section (``python3 -m bench.peaks SECTION --help``)."""

from bench.harness import run_sections

# section → (module of bench.peaks, what it measures against what)
SECTIONS = {
    "kernels": ("kernels", "the peak search against MRtrix3 sh2peaks and DIPY; --file-to-file adds a job's run"),
    "startup": ("startup", "where a fresh `fibertensor peaks` process spends its time"),
    "small-job": ("small_job", "a fresh `fibertensor peaks` on a 1,000-voxel real FOD against sh2peaks: wall, RSS"),
    "noisy": ("noisy", "the search on clean, noisy and CSD FODs against sh2peaks"),
    "processes": ("processes", "CPU seconds of whole `fibertensor peaks` and sh2peaks processes"),
    "outputs": ("outputs", "what the outputs beyond peaks, amplitudes and count add to a job"),
    "write-timeline": ("write_timeline", "every task of the writing stage: start, end, CPU"),
    "host-stages": ("host_stages", "process CPU of each stage of a job on a dwi2fod-layout .mif"),
    "transfers": ("transfers", "page-locked against pageable input on the CUDA path (GPU)"),
    "read": ("read_path", "the NIfTI read path against the one it replaced and ISA-L alone"),
}

if __name__ == "__main__":
    run_sections("python3 -m bench.peaks", __doc__, "bench.peaks", SECTIONS)
