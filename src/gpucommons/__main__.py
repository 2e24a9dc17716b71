"""`python -m gpucommons` is the `commons` command (handy where the script is not on PATH)."""

from gpucommons.cli.main import app

app(prog_name="commons")
