from toylib.life.training import main
main()
