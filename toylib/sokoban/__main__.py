from toylib.sokoban.measure import main
main()
