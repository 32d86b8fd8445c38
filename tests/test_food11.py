"""The shared pre/post-processing: shapes, normalisation, a clear BadInput for every bad case."""

import base64
import io

import numpy as np
import pytest
from PIL import Image

from servelab import decode_budget, food11, image_decode


def _jpeg_cut_in_half() -> bytes:
    buf = io.BytesIO()
    Image.effect_noise((256, 256), 50).convert("RGB").save(buf, "JPEG")
    return buf.getvalue()[: len(buf.getvalue()) // 2]


def _png(size=(50, 40), mode="RGB") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, color=128 if mode == "L" else (200, 100, 50)).save(buf, "PNG")
    return buf.getvalue()


def test_eleven_classes_in_the_lab_order():
    assert (
        food11.CLASSES[0] == "Bread"
        and food11.CLASSES[-1] == "Vegetable/Fruit"
        and len(food11.CLASSES) == 11
    )


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "P"])
def test_any_mode_becomes_normalised_3x224x224(mode):
    x = food11.tensor_from_bytes(_png(mode=mode))
    assert x.shape == (3, 224, 224) and x.dtype == np.float32
    red = (
        (200 / 255 - food11.MEAN[0]) / food11.STD[0]
        if mode in ("RGB", "RGBA", "P")
        else (128 / 255 - 0.485) / 0.229
    )
    assert abs(float(x[0, 100, 100]) - red) < 0.02


def test_base64_with_data_url_prefix_and_newlines():
    text = base64.encodebytes(_png()).decode()  # wrapped at 76 chars
    assert food11.tensor_from_base64("data:image/png;base64," + text).shape == (3, 224, 224)


@pytest.mark.parametrize(
    "text, status, words",
    [
        ("", 400, "empty"),
        ("not*base64!", 400, "not valid base64"),
        (base64.b64encode(b"hello world").decode(), 415, "not an image"),
        (base64.b64encode(_jpeg_cut_in_half()).decode(), 400, "damaged or truncated"),
    ],
)
def test_bad_input_says_what_to_fix(text, status, words):
    with pytest.raises(food11.BadInput) as err:
        food11.tensor_from_base64(text)
    assert err.value.status == status and words in str(err.value)


def test_too_many_pixels_is_refused_before_decoding():
    buf = io.BytesIO()
    Image.new("L", (8000, 6000)).save(buf, "PNG")  # 48 Mpx, compresses to a few kB
    with pytest.raises(food11.BadInput) as err:
        food11.load_image(buf.getvalue())
    assert err.value.status == 413 and "pixels" in str(err.value)


@pytest.mark.parametrize("side", [10_000, 20_000])  # 100 Mpx: Pillow warns; 400 Mpx: Pillow raises
def test_pillow_sized_bombs_are_413_with_the_pixel_limit(side):
    buf = io.BytesIO()
    Image.new("1", (side, side)).save(buf, "PNG")  # a few kB on disk
    with pytest.raises(food11.BadInput) as err:
        food11.load_image(buf.getvalue())
    assert err.value.status == 413 and f"{side * side:,} pixels" in str(err.value)
    assert f"at most {food11.MAX_IMAGE_PIXELS:,} pixels" in str(err.value)


def test_softmax_and_top_class():
    logits = np.array([0.0] * 10 + [2.0])
    label, prob = food11.top_class(logits)
    assert label == "Vegetable/Fruit"
    assert prob == pytest.approx(np.exp(2) / (10 + np.exp(2)), rel=1e-6)
    assert food11.softmax(np.array([[1000.0, 1000.0]])).tolist() == [[0.5, 0.5]]


def _encoded(img, fmt, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def test_exif_orientation_is_applied():
    """A photo stored sideways with an EXIF orientation tag is decoded upright."""
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees
    img = food11.load_image(_encoded(Image.new("RGB", (64, 48)), "JPEG", exif=exif))
    assert img.size == (48, 64)


def test_a_large_jpeg_is_decoded_at_reduced_size_but_never_below_224():
    from PIL import Image

    img = food11.load_image(_encoded(Image.new("RGB", (4000, 3000), (90, 30, 200)), "JPEG"))
    assert 224 <= min(img.size) and max(img.size) <= 1000, img.size  # 1/8 scale: 500x375


@pytest.mark.parametrize("fmt", ["GIF", "BMP", "TIFF", "ICO"])
def test_only_photo_formats_are_opened(fmt):
    from PIL import Image

    with pytest.raises(food11.BadInput) as err:
        food11.load_image(_encoded(Image.new("RGB", (64, 64)), fmt))
    assert (
        err.value.status == 415
        and f"{fmt} file" in str(err.value)
        and "JPEG, PNG or WebP" in str(err.value)
    )


def test_large_canvases_decode_one_at_a_time_and_never_hold_up_small_photos():
    """Crafted canvases queue for the one large-decode turn without taking the slots that ordinary
    photos need: with the turn held and more large uploads waiting than there are slots, a small
    photo still decodes."""
    import threading

    side = int((decode_budget.LARGE_CANVAS * 2) ** 0.5)
    large = _encoded(Image.new("RGB", (side, side), (200, 120, 40)), "PNG")
    small = _encoded(Image.new("RGB", (320, 240), (20, 120, 40)), "PNG")
    waiting = [
        threading.Thread(target=food11.tensor_from_bytes, args=(large,), daemon=True)
        for _ in range(decode_budget.MAX_CONCURRENT_DECODES + 1)
    ]
    with image_decode._large_decode:  # a large decode in progress
        for t in waiting:
            t.start()
        done = []
        small_decode = threading.Thread(
            target=lambda: done.append(food11.tensor_from_bytes(small).shape), daemon=True
        )
        small_decode.start()
        small_decode.join(timeout=60)
        assert done == [(3, 224, 224)], "a small photo waited behind the queued large canvases"
    for t in waiting:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in waiting)
