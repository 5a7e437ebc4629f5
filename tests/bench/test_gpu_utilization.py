"""bench.gpu_utilization: nvidia-smi's CSV lines parsed, averaged over a run's steady part
per GPU, and "n/a" (never a failure) where nvidia-smi is absent."""

from __future__ import annotations

import math

import pytest

from bench import gpu_utilization

# What `nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits
# -lms 200` prints on a two-GPU host, one line per GPU per sample, here three samples 0.2 s
# apart, the last with a GPU whose driver does not report utilization, and a driver message.
OUTPUT = """\
0, 12, 1043
1, 0, 4
0, 97, 20511
1, 55, 20467
No devices were found
0, 88, 20511
1, [N/A], [Not Supported]
"""


def samples() -> list:
    times = [100.0, 100.0, 100.2, 100.2, 100.3, 100.4, 100.4]
    return [gpu_utilization.parse_sample(line, at) for line, at in zip(OUTPUT.splitlines(), times)]


def test_lines_parse_to_index_utilization_and_memory():
    parsed = samples()
    assert parsed[2] == gpu_utilization.GpuSample(100.2, 0, 97.0, 20511.0)
    assert parsed[4] is None  # not a sample line
    assert parsed[6].index == 1 and math.isnan(parsed[6].utilization) and math.isnan(parsed[6].memory_mib)
    assert gpu_utilization.parse_sample("", 0.0) is None


def test_mean_over_the_steady_window_per_gpu():
    parsed = [s for s in samples() if s is not None]
    # the window leaves out the first sample; GPU 1's unreported value is not a zero
    assert gpu_utilization.mean_utilization(parsed, 100.1, 100.5) == {0: pytest.approx(92.5), 1: 55.0}
    assert gpu_utilization.mean_utilization(parsed, 100.0, 100.5) == {0: pytest.approx(197 / 3), 1: 27.5}
    assert gpu_utilization.mean_utilization(parsed, 200.0, 300.0) == {}


def test_the_figure_is_the_mean_of_the_gpus_the_run_used():
    means = {0: 92.5, 1: 55.0}
    assert gpu_utilization.describe_utilization(means, ["1"]) == ("55%", "GPU 0 92%, GPU 1 55%")
    assert gpu_utilization.describe_utilization(means, None)[0] == "74%"
    assert gpu_utilization.describe_utilization(means, ["GPU-5e1c"])[0] == "74%"  # UUIDs: every GPU sampled
    assert gpu_utilization.describe_utilization({}, ["0"]) == ("n/a", "n/a (no nvidia-smi samples)")


def test_without_nvidia_smi_the_sampler_reports_nothing_and_does_not_fail(tmp_path):
    with gpu_utilization.GpuSampler(tmp_path / "smi.csv", executable=str(tmp_path / "no-nvidia-smi")) as sampler:
        pass
    assert sampler.samples == []
    assert gpu_utilization.describe_utilization(gpu_utilization.mean_utilization(sampler.samples, 0, 1e12), None)[0] \
        == "n/a"
