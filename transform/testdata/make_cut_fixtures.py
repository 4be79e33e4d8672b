"""Writes the lossless-cut fixtures of transform/testdata once, with Pillow.

Run from this directory with Debian's python3-pil:

    /usr/bin/python3 make_cut_fixtures.py

One photo-like image (make_fixtures.photo) of 203×157 pixels, a size
that is no multiple of any iMCU, saved in the chroma layouts image/jpeg
does not write: 4:4:4, 4:2:2, progressive 4:2:0 and 4:4:4, grayscale
(progressive too). The cut tests (cut_turbojpeg_test.go) cut them and
compare their pixels with the whole image's.
"""

from make_fixtures import photo


def main():
    im = photo(203, 157, seed=5)
    im.save("cut444.jpg", quality=90, subsampling=0)
    im.save("cut422.jpg", quality=90, subsampling=1)
    im.save("cut420-progressive.jpg", quality=90, subsampling=2, progressive=True)
    im.save("cut444-progressive.jpg", quality=90, subsampling=0, progressive=True)
    im.convert("L").save("cut-gray.jpg", quality=90)
    im.convert("L").save("cut-gray-progressive.jpg", quality=90, progressive=True)
    im.save("cut420-optimized.jpg", quality=90, subsampling=2, optimize=True)


if __name__ == "__main__":
    main()
