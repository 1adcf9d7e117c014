from lceval.cli import main

# Guarded: engines that start worker processes with "spawn" (vLLM) import the parent's main
# module again in each child, which must not run the command a second time.
if __name__ == "__main__":
    raise SystemExit(main())
