from toylib.maze.measure import main
main()
