from rlark_cli.main import main

main()
