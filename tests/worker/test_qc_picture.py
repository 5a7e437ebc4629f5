"""The QC picture: its panels show the slices nibabel's closest-canonical (RAS+) reorientation
gives, in anatomical display orientation, and its lines point along the first peak in world
space, for RAS, LPS and axis-permuted affines and for directions given in world or voxel
axes; read back from the PNG file."""

from __future__ import annotations

import nibabel as nib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from PIL import Image

from worker.qc_picture import render_qc_picture, write_peaks_qc_png, write_qc_png

SHAPE = (6, 8, 5)
AFFINES = {
    "RAS anisotropic": np.diag([2.0, 2.0, 3.0, 1.0]),
    "LPS": np.diag([-2.0, -2.0, 2.0, 1.0]),
    # DIPY's small_64D: voxel axes point P, L, S.
    "PLS": np.array([[0.0, -2.0, 0.0, 10.0], [-2.0, 0.0, 0.0, 8.0], [0.0, 0.0, 2.5, -4.0], [0.0, 0.0, 0.0, 1.0]]),
}


def rotation(affine: np.ndarray) -> np.ndarray:
    return affine[:3, :3] / nib.affines.voxel_sizes(affine)


def display_planes(canonical: np.ndarray, radiological: bool) -> dict[str, np.ndarray]:
    """Mid-slices of a RAS+ array as a viewer shows them: rows top to bottom, columns left to
    right; superior up, anterior up in the axial view, anterior left in the sagittal view."""
    x, y, z = (n // 2 for n in np.array(canonical.shape[:3]) - 1)
    lr = slice(None, None, -1) if radiological else slice(None)
    return {
        "sagittal": np.swapaxes(canonical[x, ::-1, ::-1], 0, 1),
        "coronal": np.swapaxes(canonical[lr, y, ::-1], 0, 1),
        "axial": np.swapaxes(canonical[lr, ::-1, z], 0, 1),
    }


def voxel_centres(image: np.ndarray, box, rows: int, cols: int) -> np.ndarray:
    left, top, right, bottom = box
    ys = (top + (np.arange(rows) + 0.5) * (bottom - top) / rows).astype(int)
    xs = (left + (np.arange(cols) + 0.5) * (right - left) / cols).astype(int)
    return image[np.ix_(ys, xs)]


def colour(directions: np.ndarray) -> np.ndarray:
    return np.floor(255 * np.abs(directions) + 1e-9).astype(np.uint8)


@pytest.mark.parametrize("frame", ["world", "voxel"])
@pytest.mark.parametrize("radiological", [False, True])
@pytest.mark.parametrize("name", list(AFFINES))
def test_panels_show_the_canonical_slices_in_anatomical_orientation(tmp_path, name, radiological, frame):
    affine = AFFINES[name]
    rng = np.random.default_rng(1)
    world = rng.normal(size=(*SHAPE, 3))
    world /= np.linalg.norm(world, axis=-1, keepdims=True)
    directions = world if frame == "world" else world @ rotation(affine)  # R^T d per voxel
    rgb = colour(directions)
    nufo = rng.integers(1, 4, SHAPE).astype(np.uint8)
    options = dict(affine=affine, directions_frame=frame, radiological=radiological)
    path = write_qc_png(tmp_path / "qc.png", rgb, np.full((*SHAPE, 3), np.nan), nufo,
                        nib.affines.voxel_sizes(affine), "test", **options)
    picture = render_qc_picture(rgb, np.full((*SHAPE, 3), np.nan), nufo, nib.affines.voxel_sizes(affine), "test",
                                **options)
    with Image.open(path) as png:
        assert png.format == "PNG" and png.mode == "RGB"
        pixels = np.asarray(png)
    np.testing.assert_array_equal(pixels, picture.pixels)

    # The colour shown is that of the direction in world space.
    canonical_rgb = np.asarray(nib.as_closest_canonical(nib.Nifti1Image(colour(world), affine)).dataobj)
    canonical_nufo = np.asarray(nib.as_closest_canonical(nib.Nifti1Image(nufo, affine)).dataobj)
    expected_rgb = display_planes(canonical_rgb, radiological)
    expected_nufo = display_planes(canonical_nufo, radiological)
    for view in ("sagittal", "coronal", "axial"):
        rows, cols = expected_nufo[view].shape
        shown = voxel_centres(pixels, picture.panels[f"rgb {view}"], rows, cols).astype(float)
        # All weights are 1 (up to truncation): one display brightness for every voxel.
        expected = expected_rgb[view].astype(float)
        brightness = (shown * expected).sum() / (expected * expected).sum()
        assert 0.5 < brightness <= 1.0
        assert np.abs(shown - brightness * expected).max() <= 1.5, view
        colours = voxel_centres(pixels, picture.panels[f"nufo {view}"], rows, cols).reshape(-1, 3)
        pairs = {(int(n), tuple(c)) for n, c in zip(expected_nufo[view].ravel(), colours)}
        # One colour per NuFO value, a different one for each value.
        assert len(pairs) == len({n for n, _ in pairs}) == len({c for _, c in pairs}) == 3, view


@pytest.mark.parametrize("frame", ["world", "voxel"])
@pytest.mark.parametrize("radiological", [False, True])
def test_lines_point_along_the_first_peak_in_world_space(radiological, frame):
    affine = AFFINES["PLS"]
    shape = (3, 3, 3)
    world = np.array([1.0, 0.0, 1.0]) / np.sqrt(2.0)  # right and up
    direction = world if frame == "world" else rotation(affine).T @ world
    first = np.broadcast_to(direction, (*shape, 3))
    grey = np.full((*shape, 3), 147, np.uint8)  # |(147, 147, 147)| = 255: full weight
    picture = render_qc_picture(grey, first, np.ones(shape, np.uint8), nib.affines.voxel_sizes(affine), "t",
                                affine=affine, directions_frame=frame, radiological=radiological)
    pixels = picture.pixels.astype(int)
    # Screen angle of the line (degrees, counter-clockwise from the image's right) per view.
    expected = {"coronal": 135.0 if radiological else 45.0, "axial": 0.0, "sagittal": 90.0}
    for view, angle in expected.items():
        left, top, right, bottom = picture.panels[f"rgb {view}"]
        panel = pixels[top:bottom, left:right]
        magenta = (panel[..., 0] > 200) & (panel[..., 1] < 60) & (panel[..., 2] > 200)
        ys, xs = np.nonzero(magenta)
        assert ys.size > 30, view
        # Principal axis of the line pixels, all cells together (each cell is centred on its voxel).
        cell_w, cell_h = (right - left) / 3, (bottom - top) / 3
        dx, dy = xs - (xs // cell_w + 0.5) * cell_w, ys - (ys // cell_h + 0.5) * cell_h
        _, _, vt = np.linalg.svd(np.stack([dx, -dy], axis=1), full_matrices=False)
        measured = np.degrees(np.arctan2(vt[0, 1], vt[0, 0])) % 180.0
        assert min(abs(measured - angle), 180.0 - abs(measured - angle)) < 4.0, (view, measured)


def test_mismatched_arrays_are_refused_and_nothing_is_written(tmp_path):
    with pytest.raises(ValueError, match=r"expected rgb \(X, Y, Z, 3\)"):
        write_qc_png(tmp_path / "qc.png", np.zeros((4, 4, 4, 3), np.uint8), np.zeros((4, 4, 3, 3)),
                     np.zeros((4, 4, 4), np.uint8), (2.0, 2.0, 2.0), "t")
    with pytest.raises(ValueError, match=r"expected directions \(X, Y, Z, K, 3\)"):
        write_peaks_qc_png(tmp_path / "qc.png", np.zeros((4, 4, 4, 2, 3)), np.zeros((4, 4, 4, 3)),
                           np.zeros((4, 4, 4), np.uint8), (2.0, 2.0, 2.0), "t")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("frame", ["world", "voxel"])
@pytest.mark.parametrize("name", list(AFFINES))
def test_the_picture_of_peaks_has_the_pixels_of_the_picture_of_their_metric_maps(tmp_path, name, frame):
    """A peaks job draws the picture from the peaks (three slices coloured alone); a user
    drawing it from the written rgb and NuFO maps gets the same file."""
    from gpu.peaks.fodf_metrics import fodf_metrics

    rng = np.random.default_rng(4)
    shape, k = (9, 7, 6), 3
    count = rng.integers(0, k + 1, shape).astype(np.uint8)
    directions = rng.normal(size=(*shape, k, 3)).astype(np.float32)
    directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
    amplitudes = np.sort(rng.uniform(0.1, 2.0, (*shape, k)).astype(np.float32), axis=-1)[..., ::-1]
    absent = np.arange(k) >= count[..., None]
    directions[absent], amplitudes[absent] = np.nan, np.nan  # as the search leaves them
    metrics = fodf_metrics(np.zeros((*shape, 45), np.float32), directions, amplitudes, count)
    options = dict(affine=AFFINES[name], directions_frame=frame, npeaks=k)
    sizes = nib.affines.voxel_sizes(AFFINES[name])
    expected = write_qc_png(tmp_path / "maps.png", metrics.rgb, directions[..., 0, :], metrics.nufo, sizes, "t",
                            **options)
    got = write_peaks_qc_png(tmp_path / "peaks.png", directions, amplitudes, count, sizes, "t", **options)
    assert got.read_bytes() == expected.read_bytes()
    with Image.open(got) as png:
        assert np.asarray(png).any()


@pytest.mark.parametrize("name", list(AFFINES))
def test_panels_are_drawn_to_scale_in_mm(name):
    """Each panel spans its slice's field of view in mm (the same pixels per mm in every
    panel), along the RAS+ axes, whatever the order of the array's axes."""
    affine = AFFINES[name]
    shape = (6, 8, 5)
    picture = render_qc_picture(np.zeros((*shape, 3), np.uint8), np.full((*shape, 3), np.nan),
                                np.ones(shape, np.uint8), nib.affines.voxel_sizes(affine), "t", affine=affine)
    canonical = nib.as_closest_canonical(nib.Nifti1Image(np.zeros(shape, np.uint8), affine))
    extent = np.array(canonical.shape) * nib.affines.voxel_sizes(canonical.affine)  # mm along R, A, S
    scale = 320 / extent.max()  # pixels per mm of the reduced picture
    for view, (across, up) in {"sagittal": (1, 2), "coronal": (0, 2), "axial": (0, 1)}.items():
        left, top, right, bottom = picture.panels[f"rgb {view}"]
        assert abs((right - left) - extent[across] * scale) <= 1 and abs((bottom - top) - extent[up] * scale) <= 1, view


def drawn_by_pillow(drawing) -> np.ndarray:
    """The reference: the drawing's rectangles, panels, texts and lines drawn by Pillow's
    ``ImageDraw``, in its order, and reduced 2 × 2."""
    from PIL import Image, ImageDraw

    from worker.qc_text import default_font

    canvas = Image.new("RGB", (drawing.width, drawing.height))
    pen = ImageDraw.Draw(canvas)
    for box, fill, outline, width in drawing.rectangles:
        pen.rectangle(box, fill=fill, outline=outline, width=width)
    for picture, (left, top, width, height) in drawing.panels:
        canvas.paste(Image.fromarray(picture).resize((width, height), Image.NEAREST), (left, top))
    for text in drawing.texts:
        pen.text(text.xy, text.text, fill=text.fill, font=default_font(text.size), anchor=text.anchor,
                 stroke_width=text.stroke, stroke_fill=text.stroke_fill)
    for segment, width, colour in zip(drawing.segments.tolist(), drawing.widths.tolist(), drawing.colours.tolist()):
        pen.line(segment, fill=tuple(colour), width=width)
    return np.asarray(canvas.reduce(2))


def random_maps(seed: int, shape: tuple[int, int, int], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random unit first peaks (*shape, 3), their rgb map and a NuFO map of values 0..k."""
    rng = np.random.default_rng(seed)
    first = rng.normal(size=(*shape, 3))
    first /= np.linalg.norm(first, axis=-1, keepdims=True)
    rgb = colour(first * rng.uniform(0.0, 1.0, (*shape, 1)))
    return first, rgb, rng.integers(0, k + 1, shape).astype(np.uint8)


@pytest.mark.parametrize("name", list(AFFINES))
def test_the_picture_has_the_pixels_pillow_draws(name):
    """The picture, drawn without the interpreter lock (worker.qc_raster), is what Pillow's
    ImageDraw draws of the same shapes and texts, pixel for pixel."""
    from worker.qc_picture import _draw, _rasterized

    k = 4
    first, rgb, nufo = random_maps(5, (14, 11, 9), k)
    affine = AFFINES[name]
    args = (first, nufo, nib.affines.voxel_sizes(affine), "sub-07_dwi_fod.nii.gz: lmax 8, K = 4 peaks, mrtrix basis")
    drawing, _ = _draw(lambda plane: plane(rgb), *args, affine, "world", k, False)
    picture = render_qc_picture(rgb, *args, affine=affine, npeaks=k)
    expected = drawn_by_pillow(drawing)
    np.testing.assert_array_equal(_rasterized(drawing), expected)
    np.testing.assert_array_equal(picture.pixels, expected)


def test_the_remembered_orientation_is_nibabels_for_float32_and_float64_affines():
    """The orientation is remembered by the affine's linear part: a float32 affine (as a
    header may give) and the float64 affine of other values each get nibabel's own, in either
    order."""
    from worker.qc_picture import _orientation

    single = np.array([[0.0, -2.0, 0.1, 10.0], [-2.0, 0.0, 0.0, 8.0], [0.0, 0.2, 2.5, -4.0], [0.0, 0.0, 0.0, 1.0]],
                      np.float32)
    for affine in (single, AFFINES["LPS"], single, AFFINES["PLS"].astype(np.float32)):
        np.testing.assert_array_equal(_orientation(affine), nib.orientations.io_orientation(affine.astype(float)))


def test_the_glyph_store_gives_the_pixels_pillow_draws_without_pillow(tmp_path, monkeypatch):
    """With the glyph store ``fibertensor warmup`` saves, a picture's texts come from it (no
    Pillow rendering), and the picture is still what Pillow's ImageDraw draws."""
    from worker import qc_text
    from worker.qc_picture import _draw, _rasterized, save_qc_glyph_store

    monkeypatch.setenv("FIBERTENSOR_KERNEL_CACHE", str(tmp_path))
    caches = (qc_text._rendered, qc_text._advance, qc_text._ascender, qc_text._composed, qc_text._glyph_store)
    for cache in caches:
        cache.cache_clear()
    assert save_qc_glyph_store().parent == tmp_path / "qc"
    asked = []
    for name in ("_pillow_mask", "_pillow_advance", "_pillow_ascender"):
        monkeypatch.setattr(qc_text, name, lambda *args, name=name: asked.append((name, args)))
    try:
        k = 5
        first, rgb, nufo = random_maps(8, (12, 13, 7), k)
        affine = AFFINES["PLS"]
        args = (first, nufo, nib.affines.voxel_sizes(affine), "sub-12_ses-2_dwi_fod.mif: lmax 6, K = 5 peaks")
        drawing, _ = _draw(lambda plane: plane(rgb), *args, affine, "world", k, True)
        pixels = _rasterized(drawing)
    finally:
        for cache in caches:  # the other tests' texts come from Pillow again
            cache.cache_clear()
    assert asked == []
    np.testing.assert_array_equal(pixels, drawn_by_pillow(drawing))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(values=arrays(st.sampled_from([np.float32, np.float64]), st.integers(1, 300),
                     elements=st.floats(0, 1e6, width=32)),
       q=st.one_of(st.sampled_from([0.0, 1.0, 50.0, 99.0, 100.0]), st.floats(0, 100)))
def test_the_contrast_percentile_is_numpys_bit_for_bit(values, q):
    """The picture's contrast (the 99th percentile of the slices' AFD) as np.percentile gives
    it, without the import of numpy.ma that np.percentile makes."""
    from worker.qc_picture import _percentile

    ours, numpys = _percentile(values, q), np.percentile(values, q)
    assert type(ours) is type(numpys) and ours == numpys
