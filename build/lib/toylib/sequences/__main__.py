from toylib.sequences.measure import main
main()
