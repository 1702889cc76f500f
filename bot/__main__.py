"""`python -m bot`: the command line (bot/cli)."""

import sys

if __name__ == "__main__":
    try:
        from bot.cli.main import main
    except KeyboardInterrupt:  # Ctrl-C while the modules load: as quiet as during a command
        print("python -m bot: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(main())
