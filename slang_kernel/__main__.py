"""Command line: `python -m slang_kernel install [--user|--sys-prefix|--prefix P]` (also `slang-kernel`)."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from .backends.registry import choices


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slang_kernel",
                                     description="Jupyter-native notebooks for the Slang shading language.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("install", help="install the Slang Jupyter kernel (kernelspec 'slang')")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="into the per-user Jupyter data directory")
    where.add_argument("--sys-prefix", action="store_true",
                       help="into this Python environment (sys.prefix); the default inside a venv/conda env")
    where.add_argument("--prefix", metavar="PREFIX", help="into PREFIX/share/jupyter/kernels")
    p.add_argument("--name", default="slang", help="kernelspec name (default: slang)")
    p.add_argument("--display-name", default="Slang", help="name shown in Jupyter (default: Slang)")
    p.add_argument("--backend", choices=choices(),
                   help="default backend of the kernel's session (sets SLANG_KERNEL_BACKEND)")
    u = sub.add_parser("uninstall", help="remove the Slang kernelspec")
    u.add_argument("--name", default="slang")
    args = parser.parse_args(argv)

    from .frontend.kernel.install import install, uninstall

    if args.command == "install":
        env = {"SLANG_KERNEL_BACKEND": args.backend} if args.backend else None
        path = install(user=args.user, sys_prefix=args.sys_prefix, prefix=args.prefix,
                       kernel_name=args.name, display_name=args.display_name, env=env)
        print(f"Installed the {args.display_name} kernel (kernelspec {args.name!r}) in {path}")
        return 0
    try:
        path = uninstall(args.name)
    except Exception as exc:  # NoSuchKernel and friends
        print(f"could not remove kernelspec {args.name!r}: {exc}", file=sys.stderr)
        return 1
    print(f"Removed {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
