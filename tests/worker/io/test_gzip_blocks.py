"""The block-parallel gzip writer against the tools that own the format: Python's gzip reads
back the content, ISA-L's own threaded writer produces the same deflate stream, and nibabel
writes the same bytes for a NIfTI that we hand over in parts."""

import gzip

import nibabel as nib
import numpy as np
import pytest
from isal import igzip_threaded

from worker.io.gzip_blocks import GZIP_BLOCK, write_gzip
from worker.io.nifti import _stored_parts, derived_image, read_nifti_header, save_nifti_atomic
from worker.io.images import write_image


@pytest.mark.parametrize("size", [0, 10, GZIP_BLOCK - 352, GZIP_BLOCK, 3 * GZIP_BLOCK + 12345])
@pytest.mark.parametrize("threads", [1, 3, None])
def test_one_buffer_gives_the_deflate_stream_of_isals_threaded_writer(tmp_path, size, threads):
    rng = np.random.default_rng(size)
    content = (rng.random(size) * 40).astype(np.uint8).tobytes()  # compressible, not trivially
    reference = tmp_path / "isal.gz"
    with igzip_threaded.open(reference, "wb", compresslevel=1, threads=2, block_size=GZIP_BLOCK) as stream:
        stream.write(content)
    ours = tmp_path / "ours.gz"
    write_gzip(ours, [content], threads)
    written, expected = ours.read_bytes(), reference.read_bytes()
    assert gzip.decompress(written) == content
    # RFC 1952 order of XFL and OS (isal writes them swapped); the rest byte for byte
    assert written[:8] == expected[:8] and written[8:10] == b"\x00\xff"
    assert written[10:] == expected[10:]


@pytest.mark.parametrize("threads", [1, 2, 3, None])
def test_parts_give_their_concatenation_the_same_bytes_at_any_thread_count(tmp_path, threads):
    rng = np.random.default_rng(1)
    content = (rng.random(5 * GZIP_BLOCK // 2) * 9).astype(np.uint8)
    cuts = [0, 7, GZIP_BLOCK - 3, GZIP_BLOCK + 5, 2 * GZIP_BLOCK, len(content)]
    parts = [b"header"] + [content[a:b] for a, b in zip(cuts, cuts[1:])]
    write_gzip(tmp_path / "one.gz", parts, threads=1)
    write_gzip(tmp_path / "many.gz", parts, threads=threads)
    assert gzip.decompress((tmp_path / "one.gz").read_bytes()) == b"header" + content.tobytes()
    assert (tmp_path / "many.gz").read_bytes() == (tmp_path / "one.gz").read_bytes()


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.float64, np.int16])
def test_nifti_parts_are_what_nibabel_writes(tmp_path, dtype):
    rng = np.random.default_rng(2)
    affine = np.array([[0, -2, 0, 10], [1.5, 0, 0, -3], [0, 0, 2.5, 7], [0, 0, 0, 1.0]])
    reference = read_nifti_header(write_image(tmp_path / "ref.nii.gz", rng.random((5, 6, 7, 4)).astype(np.float32),
                                              affine), "fod")
    data = (rng.random((5, 6, 7, 9)) * 100).astype(dtype)
    for image in (derived_image(reference, data), derived_image(reference, data[..., 0])):
        parts = _stored_parts(image)
        assert len(parts) == 2  # header and array, not joined
        assert b"".join(memoryview(part).cast("B").tobytes() for part in parts) == image.to_bytes()
    saved = save_nifti_atomic(derived_image(reference, data), tmp_path / "out.nii.gz")
    loaded = nib.load(saved)
    np.testing.assert_array_equal(np.asanyarray(loaded.dataobj), data)
    np.testing.assert_allclose(loaded.affine, affine)


def test_a_scaled_image_is_written_by_nibabel(tmp_path):
    data = np.linspace(0, 1000, 5 * 6 * 7).reshape(5, 6, 7)
    image = nib.Nifti1Image(data, np.eye(4), dtype=np.int16)  # nibabel scales into int16
    parts = _stored_parts(image)
    assert len(parts) == 1 and parts[0] == image.to_bytes()
    loaded = nib.load(save_nifti_atomic(image, tmp_path / "scaled.nii"))
    np.testing.assert_allclose(loaded.get_fdata(), data, atol=float(loaded.dataobj.slope))
