from swemill.cli.main import main

main()
