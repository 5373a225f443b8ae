from toylib.sokoban.training import main
main()
