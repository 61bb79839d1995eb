from pyattacker.cli import main

main()
