#!/usr/bin/env bash
# Writes the image header test cases in tests/data/cost/images/ with a real
# encoder (Debian's imagemagick; not needed by CI, the files are committed).
# valid/<name>_<W>x<H>.<ext> must read as W×H; invalid/* must be refused.
set -euo pipefail
cd "$(dirname "$0")/../data/cost/images"
IM=/usr/bin/convert
rm -f valid/* invalid/*
$IM -size 37x21 xc:red valid/png_37x21.png
$IM -size 1200x800 gradient:blue-yellow -quality 30 valid/jpeg_baseline_1200x800.jpg
$IM -size 640x480 gradient:red-green -interlace JPEG -quality 30 valid/jpeg_progressive_640x480.jpg
$IM -size 99x77 xc:white -set comment "a comment segment before the frame" -quality 50 valid/jpeg_comment_99x77.jpg
$IM -size 300x200 xc:green valid/gif_300x200.gif
$IM -size 333x111 gradient:white-black -quality 40 valid/webp_lossy_333x111.webp
$IM -size 64x4000 xc:blue -define webp:lossless=true valid/webp_lossless_64x4000.webp
$IM -size 50x60 xc:none -fill red -draw "circle 25,30 25,10" -quality 50 valid/webp_alpha_50x60.webp
head -c 20 valid/png_37x21.png > invalid/png_truncated.png
head -c 12 valid/jpeg_baseline_1200x800.jpg > invalid/jpeg_no_frame.jpg
head -c 8 valid/gif_300x200.gif > invalid/gif_truncated.gif
head -c 16 valid/webp_lossy_333x111.webp > invalid/webp_truncated.webp
printf 'RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00' > invalid/riff_wave.wav
printf 'not an image at all, just some text\n' > invalid/text.txt
: > invalid/empty.bin
ls -l valid invalid
