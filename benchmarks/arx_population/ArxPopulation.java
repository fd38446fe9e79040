/*
 * Prints ARX's own population-risk numbers for the inputs read from stdin, one result line per
 * input line. Used only to obtain reference values for duckanon's tests
 * (tests/solver/test_population_estimators.py); run it through run.py beside this file.
 *
 * Input lines (whitespace-separated):
 *   uniq <name> <N> <size>:<count> ...        -> RiskModelPopulationUniqueness (ARX's public API,
 *                                                default ARXSolverConfiguration) for that class-size
 *                                                histogram and population size N
 *   kmap <name> <k> <n> <N> <poisson|ztp> <significance>
 *                                             -> KMap's derived k: ARX's KMap criterion with the
 *                                                population model N is initialised by a real
 *                                                anonymization of an n-row table, then getDerivedK()
 * Output lines: tab-separated, doubles printed with Double.toString (round-trip exact).
 */

import java.util.Locale;
import java.util.Scanner;

import org.deidentifier.arx.ARXAnonymizer;
import org.deidentifier.arx.ARXConfiguration;
import org.deidentifier.arx.ARXPopulationModel;
import org.deidentifier.arx.ARXSolverConfiguration;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.AttributeType.Hierarchy.DefaultHierarchy;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.criteria.KMap;
import org.deidentifier.arx.risk.RiskModelHistogram;
import org.deidentifier.arx.risk.RiskModelPopulationUniqueness;
import org.deidentifier.arx.risk.RiskModelPopulationUniqueness.PopulationUniquenessModel;

import com.carrotsearch.hppc.IntIntOpenHashMap;

public class ArxPopulation {

    public static void main(String[] args) throws Exception {
        Locale.setDefault(Locale.ROOT);
        Scanner in = new Scanner(System.in);
        while (in.hasNextLine()) {
            String line = in.nextLine().trim();
            if (line.isEmpty() || line.startsWith("#")) continue;
            String[] f = line.split("\\s+");
            if (f[0].equals("uniq")) {
                uniqueness(f);
            } else if (f[0].equals("kmap")) {
                kmap(f);
            } else {
                throw new IllegalArgumentException("bad line: " + line);
            }
        }
    }

    private static void uniqueness(String[] f) {
        String name = f[1];
        long populationSize = Long.parseLong(f[2]);
        IntIntOpenHashMap histogram = new IntIntOpenHashMap();
        for (int i = 3; i < f.length; i++) {
            String[] sc = f[i].split(":");
            histogram.put(Integer.parseInt(sc[0]), Integer.parseInt(sc[1]));
        }
        RiskModelPopulationUniqueness risk = new RiskModelPopulationUniqueness(
                ARXPopulationModel.create(populationSize),
                new RiskModelHistogram(histogram),
                ARXSolverConfiguration.create());
        StringBuilder out = new StringBuilder("uniq\t" + name);
        for (PopulationUniquenessModel m : new PopulationUniquenessModel[] {
                PopulationUniquenessModel.PITMAN, PopulationUniquenessModel.ZAYATZ,
                PopulationUniquenessModel.SNB, PopulationUniquenessModel.DANKAR }) {
            out.append('\t').append(m.name().toLowerCase()).append('=')
               .append(Double.toString(risk.getNumUniqueTuples(m)))
               .append(',').append(Double.toString(risk.getFractionOfUniqueTuples(m)))
               .append(',').append(risk.isAvailableEstimate(m));
        }
        out.append("\tdankar_model=").append(risk.getPopulationUniquenessModel().name().toLowerCase());
        System.out.println(out);
    }

    private static void kmap(String[] f) throws Exception {
        String name = f[1];
        int k = Integer.parseInt(f[2]);
        int n = Integer.parseInt(f[3]);
        long populationSize = Long.parseLong(f[4]);
        KMap.CellSizeEstimator estimator = f[5].equals("poisson") ? KMap.CellSizeEstimator.POISSON
                                                                  : KMap.CellSizeEstimator.ZERO_TRUNCATED_POISSON;
        double significance = Double.parseDouble(f[6]);

        // an n-row table with one quasi-identifier holding one value: the anonymization only
        // serves to run KMap.initialize() on it, which derives k from n, N and the estimator
        Data.DefaultData data = Data.create();
        data.add("q");
        for (int i = 0; i < n; i++) data.add("a");
        DefaultHierarchy hierarchy = Hierarchy.create();
        hierarchy.add("a", "*");
        data.getDefinition().setAttributeType("q", hierarchy);

        KMap criterion = new KMap(k, significance, ARXPopulationModel.create(populationSize), estimator);
        ARXConfiguration config = ARXConfiguration.create();
        config.addPrivacyModel(criterion);
        config.setSuppressionLimit(1d);
        new ARXAnonymizer().anonymize(data, config);
        System.out.println("kmap\t" + name + "\t" + criterion.getDerivedK() + "\t"
                           + Double.toString(criterion.getType1Error()));
    }
}
