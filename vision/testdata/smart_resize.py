"""Qwen2-VL's smart_resize as transformers' image_processing_qwen2_vl.py
writes it (the reference of vision.Rule.Size), over the cases of a JSON
file: [[height, width, factor, min_pixels, max_pixels], ...]. Prints
[[h_bar, w_bar] or null (refused), ...]. Standard library only."""
import json
import math
import sys


def smart_resize(height, width, factor, min_pixels, max_pixels):
    if height < factor or width < factor:
        raise ValueError("smaller than factor")
    if max(height, width) / min(height, width) > 200:
        raise ValueError("aspect")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


out = []
for h, w, f, lo, hi in json.load(open(sys.argv[1])):
    try:
        out.append(list(smart_resize(h, w, f, lo, hi)))
    except ValueError:
        out.append(None)
print(json.dumps(out))
