from toylib.sequences.training import main
main()
